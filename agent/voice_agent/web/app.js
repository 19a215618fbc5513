// The voice agent's page: one WebSocket (/ws, or the URL GET /ws-url gives) for JSON events and
// binary PCM frames.
// Audio plays without gaps because every chunk is scheduled to start exactly where the previous
// one ends (the nextStartTime cursor), not when it arrives.
"use strict";

let sampleRate = 24000; // pcm s16le mono; the `ready` event says the agent's actual rate
const LEAD_S = 0.08; // head start for the first chunk (and after an underrun): absorbs network jitter

const stats = {
  scheduled: [],        // [{start, duration}] of the current turn, in AudioContext seconds
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
};
window.__voiceStats = stats;

const $ = (id) => document.getElementById(id);
let ws = null;
let ctx = null;
let nextStartTime = 0;
let sentAt = 0;
let acceptingAudio = false;
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
  if (nextStartTime < ac.currentTime + 0.005) nextStartTime = ac.currentTime + LEAD_S;
  const source = ac.createBufferSource();
  source.buffer = audio;
  source.connect(ac.destination);
  source.onended = () => sources.delete(source);
  source.start(nextStartTime);
  sources.add(source);
  stats.scheduled.push({ start: nextStartTime, duration: audio.duration });
  nextStartTime += audio.duration;
  stats.chunks++;
  if (stats.ttfaMs === null) {
    stats.ttfaMs = Math.round(performance.now() - sentAt);
    showMetrics();
  }
}

function stopAudio() {
  acceptingAudio = false;
  for (const source of sources) { try { source.stop(); } catch (e) { /* already stopped */ } }
  sources.clear();
  nextStartTime = 0;
}

function showMetrics() {
  const ttfa = stats.ttfaMs === null ? "–" : `${stats.ttfaMs} ms`;
  const server = stats.serverTtfaMs === null ? "" : ` (agent: ${stats.serverTtfaMs} ms)`;
  $("metrics").textContent = `mode: ${stats.mode || "–"} · time to first audio: ${ttfa}${server}` +
    ` · chunks: ${stats.chunks}`;
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
    case "end":
      if (stats.state !== "interrupted") stats.state = "idle";
      $("interrupt").disabled = true;
      showMetrics();
      break;
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
  Object.assign(stats, { scheduled: [], ttfaMs: null, serverTtfaMs: null, text: "", chunks: 0, dropped: 0,
    interrupted: false, events: [], errors: [] });
  $("answer").textContent = "";
  $("errors").textContent = "";
  sentAt = performance.now();
  ws.send(JSON.stringify({ prompt, mode: $("mode").value }));
});

$("interrupt").addEventListener("click", () => {
  stopAudio();
  stats.interrupted = true;
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "interrupt" }));
});

connect();
