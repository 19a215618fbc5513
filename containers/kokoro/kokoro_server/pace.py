"""The decoder's cost the job sizer sizes windows by (sizing.Cost): fitted to windows of two sizes
decoded at warm-up, then to the windows the server decodes (:class:`PaceMeter`); a pace measured
again when the engine is idle while no cost could be fitted."""

from __future__ import annotations

import collections
import statistics
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from voicestream.protocol import NATIVE_SAMPLE_RATE

from .engines import Engine
from .engines.windows import FRAME_S
from .g2p import Phonemizer
from .model_dir import style_for
from .sizing import Cost

WARM_UP_TEXT = "Hello, world."
WARM_UP_COST_TEXT = "Hello, world. This is how I sound, reading aloud."
"""Decoded in windows of two sizes at warm-up (:func:`warm_up_windows`): about 3 s of audio, so its
first third is about the smallest window a server decodes (20 frames and their context)."""
WARM_UP_LANG = "a"  # read as English whatever the voice's language: the pace is measured on the same phonemes


def warm_up_pace(engine: Engine, phonemizer: Phonemizer, *, voice: str, pack: np.ndarray, runs: int = 3) -> float:
    """``decoder_pace`` on the warm-up sentence: the pace a server measures at warm-up."""
    chunk = phonemizer.phonemize(WARM_UP_TEXT, voice=voice, lang=WARM_UP_LANG)[0]
    return decoder_pace(engine, chunk, style_for(pack, chunk), runs=runs)


def decoder_pace(engine: Engine, phonemes: str, style: np.ndarray, *, runs: int = 3) -> float:
    """The decoder's seconds per second of audio: the median of ``runs`` one-shot decodings of
    ``phonemes`` (the front excluded; sizing.Cost.pace)."""
    paces = []
    for _ in range(runs):
        decoding = engine.begin(phonemes, style, 1.0)
        started = time.perf_counter()
        audio = decoding.rest()
        paces.append((time.perf_counter() - started) * NATIVE_SAMPLE_RATE / max(1, audio.size))
    return float(np.median(paces))


FIT_WINDOWS = 64
"""The decoded windows a cost is fitted to (the most recent)."""
FIT_LEAST = 8
"""Windows needed before a fitted cost replaces the measured pace, and how often it is refitted."""
FIT_SPREAD = 2.0
"""Their largest must decode at least this many times the frames of their smallest: a line through
sizes that barely differ says nothing about a fixed cost per call."""
WARM_UP_SHARES = (3, 1)
"""The warm-up decodes the first third of WARM_UP_COST_TEXT and the whole of it, by turns: from one
size alone, a pace carries a call's fixed cost in every frame, and on the tiny torch model it read
twice the per-frame pace, so the windows of a server's first requests were sized as if the decoder
were that slow (more windows, each paying a call and its context)."""


def fit_cost(windows: Sequence[tuple[int, float]]) -> Cost | None:
    """Least squares ``seconds = overhead + frames * FRAME_S * pace`` over (decoded frames, seconds)
    pairs, or None while they are too few or too alike (FIT_LEAST, FIT_SPREAD) or the line is not
    a cost (a pace of 0 or less). A negative overhead is read as none: the pace through the origin."""
    if len(windows) < FIT_LEAST:
        return None
    frames = [float(n) for n, _ in windows]
    seconds = [t for _, t in windows]
    if max(frames) < FIT_SPREAD * min(frames):
        return None
    mean_n, mean_t = statistics.fmean(frames), statistics.fmean(seconds)
    spread = sum((n - mean_n) ** 2 for n in frames)
    slope = sum((n - mean_n) * (t - mean_t) for n, t in zip(frames, seconds)) / spread
    if slope <= 0:
        return None
    overhead = mean_t - slope * mean_n
    if overhead < 0:
        return Cost(pace=sum(seconds) / (sum(frames) * FRAME_S))
    return Cost(pace=slope / FRAME_S, overhead=overhead)


def warm_up_windows(engine: Engine, phonemizer: Phonemizer, *, voice: str, pack: np.ndarray) -> list[tuple[int, float]]:
    """(decoded frames, seconds) of windows of WARM_UP_COST_TEXT, decoded whole and its first
    ``1 / WARM_UP_SHARES`` alone, FIT_LEAST in all: what :class:`PaceMeter` fits a cost to before
    the first request."""
    chunk = phonemizer.phonemize(WARM_UP_COST_TEXT, voice=voice, lang=WARM_UP_LANG)[0]
    decoding = engine.begin(chunk, style_for(pack, chunk), 1.0)
    windows = []
    for _ in range(-(-FIT_LEAST // len(WARM_UP_SHARES))):
        for share in WARM_UP_SHARES:
            frames = max(1, decoding.frames // share)
            started = time.perf_counter()
            decoding.decode(0, frames)
            windows.append((frames, time.perf_counter() - started))
    return windows


def pace_of(windows: Sequence[tuple[int, float]]) -> float:
    """The pace of the largest of ``windows`` (the median of theirs): the figure a cost falls back
    on while none is fitted."""
    largest = max(frames for frames, _ in windows)
    return float(np.median([seconds / (frames * FRAME_S) for frames, seconds in windows if frames == largest]))


PACE_INTERVAL_S = 30.0
"""At most one idle re-measurement of the decoder pace per this long: each costs one decoding of
the warm-up sentence (~1 s of audio), and a job that arrives meanwhile waits for it."""
PACE_FIGURES = 5


class PaceMeter:
    """The decoder cost windows are cut by: the cost fitted to the last FIT_WINDOWS windows
    (:func:`fit_cost`), the warm-up's first (:func:`warm_up_windows`), refitted every FIT_LEAST
    windows, so that one warm-up taken while the machine was busy does not size every window. While
    no cost could be fitted (no warm-up, or windows too few or too alike), the median of the last
    PACE_FIGURES paces, the first one's and those measured since when the engine was idle (every
    PACE_INTERVAL_S at most). ``remeasure=False`` (a pinned pace): the first figure, always.

    The engine's worker thread records windows and idle measurements; the event loop and the worker
    read the cost: a lock makes each of those one step."""

    def __init__(self, *, remeasure: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.remeasure = remeasure
        self.figures: collections.deque[Cost] = collections.deque(maxlen=PACE_FIGURES)
        self._windows: collections.deque[tuple[int, float]] = collections.deque(maxlen=FIT_WINDOWS)
        self._fitted: Cost | None = None
        self._observed = 0
        self._clock = clock
        self._last = clock()

    def observe(self, frames: int, seconds: float) -> bool:
        """A window of ``frames`` decoded frames took ``seconds`` (the engine's worker thread);
        True when the cost was refitted (every FIT_LEAST windows)."""
        if not self.remeasure or frames < 1 or not seconds > 0:
            return False
        with self._lock:
            self._windows.append((frames, seconds))
            self._observed += 1
            if self._observed % FIT_LEAST:
                return False
            self._fitted = fit_cost(list(self._windows)) or self._fitted
            return True

    def due(self) -> bool:
        """Whether an idle re-measurement is due: never once a cost is fitted (every window decoded
        measures it then, and an idle decoding would only hold up the next job)."""
        return self.remeasure and self._fitted is None and self._clock() - self._last >= PACE_INTERVAL_S

    def add(self, figure: Cost) -> Cost:
        """Record a measured cost (a pace, or a cost set from outside); return the cost to size
        windows by now."""
        with self._lock:
            self.figures.append(figure)
            self._last = self._clock()
        return self.current

    @property
    def fitted(self) -> bool:
        """The cost comes from the windows decoded (no longer from the measured paces)."""
        return self._fitted is not None

    @property
    def current(self) -> Cost:
        with self._lock:
            if self._fitted is not None:
                return self._fitted
            if not self.figures:
                return Cost(pace=0.0)
            return Cost(pace=float(np.median([f.pace for f in self.figures])),
                        overhead=float(np.median([f.overhead for f in self.figures])))
