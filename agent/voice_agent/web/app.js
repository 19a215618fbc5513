// The voice agent's page: one WebSocket (/ws, or the URL GET /ws-url gives) for JSON events and
// binary PCM frames.
// Audio plays without gaps because every chunk is scheduled to start exactly where the previous
// one ends (the nextStartTime cursor), not when it arrives.
// Captions: `words` events give each word's place on the turn's audio clock (ms of the turn's
// audio before it); each scheduled chunk records where it starts on that clock and in AudioContext
// time, so the word under the play head is found from ctx.currentTime, gaps and all.
"use strict";

let sampleRate = 24000; // pcm s16le mono; the `ready` event says the agent's actual rate
const LEAD_S = 0.08; // head start for the first chunk (and after an underrun): absorbs network jitter
const LATE_S = 0.005; // a chunk due to start sooner than this from now has arrived too late: an underrun

const stats = {
  scheduled: [],        // [{start, duration, clock, arrived}] of the current turn, in AudioContext seconds
  underruns: 0,         // chunks that arrived after the audio before them had played out
  ttfaMs: null,         // prompt sent -> first chunk scheduled, measured here
  serverTtfaMs: null,   // the agent's own first_audio t_ms
  mode: null,
  turn: 0,
  state: "connecting",  // connecting | idle | speaking | interrupted | closed
  text: "",
  chunks: 0,
  dropped: 0,           // audio frames that arrived after an interrupt
  interrupted: false,
  model: null,
  offline: null,
  errors: [],
  events: [],           // event types of the current turn, in order
  voices: [],           // from the ready event: what the voice picker offers
  languages: {},        // from the ready event: the TTS server's languages, code -> name
  words: 0,             // words received this turn
  highlights: [],       // indices of the words highlighted, in the order they lit up
};
window.__voiceStats = stats;

const $ = (id) => document.getElementById(id);
let ws = null;
let ctx = null;
let nextStartTime = 0;
let sentAt = 0;
let acceptingAudio = false;
let clockS = 0;           // the turn's audio received so far, in seconds (the words' clock)
let words = [];           // [{text, start_ms, end_ms, el}] of the turn, in order
let lit = -1;             // index of the highlighted word
let highlighter = 0;      // requestAnimationFrame handle
const sources = new Set();

function audioContext() {
  if (!ctx) ctx = new AudioContext({ sampleRate });
  if (ctx.state === "suspended") ctx.resume();
  return ctx;
}

function schedule(buffer) {
  if (!acceptingAudio) { stats.dropped++; return; }
  const ac = audioContext();
  const pcm = new Int16Array(buffer, 0, buffer.byteLength >> 1);
  if (pcm.length === 0) return;
  const audio = ac.createBuffer(1, pcm.length, sampleRate);
  const channel = audio.getChannelData(0);
  for (let i = 0; i < pcm.length; i++) channel[i] = pcm[i] / 32768;
  const arrived = ac.currentTime;
  if (nextStartTime < arrived + LATE_S) {
    if (stats.scheduled.length > 0) stats.underruns++;
    nextStartTime = arrived + LEAD_S;
  }
  const source = ac.createBufferSource();
  source.buffer = audio;
  source.connect(ac.destination);
  source.onended = () => sources.delete(source);
  source.start(nextStartTime);
  sources.add(source);
  stats.scheduled.push({ start: nextStartTime, duration: audio.duration, clock: clockS, arrived });
  clockS += audio.duration;
  nextStartTime += audio.duration;
  stats.chunks++;
  if (stats.ttfaMs === null) {
    stats.ttfaMs = Math.round(performance.now() - sentAt);
    showMetrics();
  }
}

// The turn's audio clock (seconds) at AudioContext time t, or null before the first chunk plays.
function clockAt(t) {
  let found = null;
  for (const s of stats.scheduled) {
    if (s.start > t) break;
    found = s.clock + Math.min(t - s.start, s.duration);
  }
  return found;
}

function highlight() {
  highlighter = 0;
  if (!ctx || !acceptingAudio) return;
  const clock = clockAt(ctx.currentTime);
  if (clock !== null) {
    const ms = clock * 1000;
    let now = lit;
    while (now + 1 < words.length && words[now + 1].start_ms <= ms) now++;
    if (now !== lit) {
      if (lit >= 0) words[lit].el.classList.remove("spoken");
      lit = now;
      words[lit].el.classList.add("spoken");
      stats.highlights.push(lit);
    }
  }
  if (lit + 1 < words.length || clock === null) highlighter = requestAnimationFrame(highlight);
}

function addWords(event) {
  const caption = $("caption");
  for (const word of event.words) {
    const el = document.createElement("span");
    el.className = "word";
    el.textContent = word.text;
    caption.append(el, " ");
    words.push({ ...word, el });
  }
  stats.words = words.length;
  if (!highlighter) highlighter = requestAnimationFrame(highlight);
}

function resetWords() {
  if (highlighter) cancelAnimationFrame(highlighter);
  highlighter = 0;
  words = [];
  lit = -1;
  clockS = 0;
  $("caption").textContent = "";
}

// Kokoro voice names start with their language and gender: af_heart is American English, female,
// jf_alpha Japanese. The names of the languages come from the TTS server (ready.languages); a voice
// is read in its own language, and the prompt carries it as `lang` (voicestream.protocol.languages).
function voiceLanguage(name) {
  return name.length > 2 && name[2] === "_" && stats.languages[name[0]] ? name[0] : null;
}

function voiceGroup(name) {
  const code = voiceLanguage(name);
  return code ? stats.languages[code] : "Other";
}

function showVoices(voices, chosen, languages) {
  stats.languages = languages || {};
  stats.voices = voices || [];
  const picker = $("voice");
  picker.textContent = "";
  const fallback = document.createElement("option");
  fallback.value = "";
  fallback.textContent = "default voice";
  picker.appendChild(fallback);
  const groups = new Map();  // in the order the server lists them (sorted: English first)
  for (const name of stats.voices) {
    const label = voiceGroup(name);
    if (!groups.has(label)) {
      const group = document.createElement("optgroup");
      group.label = label;
      groups.set(label, group);
      picker.appendChild(group);
    }
    const option = document.createElement("option");
    option.value = name;
    option.textContent = voiceLanguage(name) ? `${name} · ${voiceGroup(name)}` : name;
    option.selected = name === chosen;
    groups.get(label).appendChild(option);
  }
  picker.disabled = stats.voices.length === 0;
}

function stopAudio() {
  acceptingAudio = false;
  if (highlighter) cancelAnimationFrame(highlighter);
  highlighter = 0;
  for (const source of sources) { try { source.stop(); } catch (e) { /* already stopped */ } }
  sources.clear();
  nextStartTime = 0;
}

function showMetrics() {
  const ttfa = stats.ttfaMs === null ? "–" : `${stats.ttfaMs} ms`;
  const server = stats.serverTtfaMs === null ? "" : ` (agent: ${stats.serverTtfaMs} ms)`;
  $("metrics").textContent = `mode: ${stats.mode || "–"} · time to first audio: ${ttfa}${server}` +
    ` · chunks: ${stats.chunks} · underruns: ${stats.underruns}`;
}

function showError(event) {
  stats.errors.push(event);
  const line = document.createElement("div");
  line.textContent = `${event.code}: ${event.message}`;
  $("errors").appendChild(line);
}

function onEvent(event) {
  if (event.turn !== undefined) stats.events.push(event.type);
  switch (event.type) {
    case "ready":
      if (Number.isInteger(event.sample_rate) && !ctx) sampleRate = event.sample_rate;
      stats.model = event.model;
      stats.offline = event.model === "offline";
      stats.state = "idle";
      $("status").textContent = `connected · model: ${event.model_id} · speech: ${event.tts}`;
      showVoices(event.voices, event.voice, event.languages);
      if (stats.offline) {
        $("offline").style.display = "block";
        $("offline").textContent = `Offline mode: a scripted model answers (${event.offline_reason}). ` +
          "Speech is real; the words are canned.";
      }
      break;
    case "start":
      stats.turn = event.turn;
      stats.mode = event.mode;
      stats.state = "speaking";
      acceptingAudio = true;
      $("interrupt").disabled = false;
      showMetrics();
      break;
    case "text":
      stats.text += event.text;
      $("answer").textContent = stats.text;
      break;
    case "words":
      if (acceptingAudio) addWords(event);
      break;
    case "first_audio":
      stats.serverTtfaMs = event.t_ms;
      showMetrics();
      break;
    case "interrupted":
      stats.state = "interrupted";
      break;
    case "error":
      showError(event);
      break;
    case "end": {
      if (stats.state !== "interrupted") stats.state = "idle";
      // The audio plays on after the last of it arrived: the listener can still cut it short.
      const left = ctx ? nextStartTime - ctx.currentTime : 0;
      if (left > 0 && acceptingAudio) setTimeout(() => { if (stats.state !== "speaking") $("interrupt").disabled = true; }, left * 1000);
      else $("interrupt").disabled = true;
      showMetrics();
      break;
    }
  }
}

// Where to connect. Served by `deploy-agent chat --web`, GET /ws-url hands out a URL signed a
// moment ago (AgentCore's presigned URLs expire within 300 s), so it is asked again before every
// (re)connection, passing back its session id to stay in the same runtime session. Served by the
// agent itself there is no /ws-url (404): same-origin /ws.
let sessionId = null;

async function socketUrl() {
  const query = sessionId ? `?session=${encodeURIComponent(sessionId)}` : "";
  const response = await fetch(`/ws-url${query}`, { cache: "no-store" });
  if (response.status === 404) {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}/ws`;
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `GET /ws-url: ${response.status}`);
  sessionId = body.session_id || sessionId;
  return body.url;
}

async function connect() {
  let url;
  try {
    url = await socketUrl();
  } catch (e) {
    stats.state = "closed";
    $("status").textContent = `no connection URL (${e.message}); retrying…`;
    setTimeout(connect, 3000);
    return;
  }
  ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  ws.onmessage = (message) => {
    if (typeof message.data === "string") onEvent(JSON.parse(message.data));
    else schedule(message.data);
  };
  ws.onclose = () => {
    stats.state = "closed";
    $("status").textContent = "disconnected; retrying…";
    setTimeout(connect, 1000);
  };
}

$("ask").addEventListener("submit", (e) => {
  e.preventDefault();
  const prompt = $("prompt").value;
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  audioContext(); // created inside the user gesture so the browser lets it play
  if (stats.state === "speaking") ws.send(JSON.stringify({ type: "interrupt" })); // barge-in by asking
  stopAudio();
  Object.assign(stats, { scheduled: [], ttfaMs: null, serverTtfaMs: null, text: "", chunks: 0, underruns: 0,
    dropped: 0, interrupted: false, events: [], errors: [], words: 0, highlights: [] });
  resetWords();
  $("answer").textContent = "";
  $("errors").textContent = "";
  sentAt = performance.now();
  const request = { prompt, mode: $("mode").value };
  if (!$("voice").disabled && $("voice").value) {
    request.voice = $("voice").value;
    const lang = voiceLanguage(request.voice);
    if (lang) request.lang = lang;  // the answer is read in the voice's language
  }
  ws.send(JSON.stringify(request));
});

$("interrupt").addEventListener("click", () => {
  // How much of the turn the listener heard: the agent keeps only those words in its history.
  const heard = ctx ? clockAt(ctx.currentTime) : null;
  stopAudio();
  stats.interrupted = true;
  const message = { type: "interrupt" };
  if (heard !== null) message.heard_ms = Math.round(heard * 1000);
  $("interrupt").disabled = true;
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
});

connect();
