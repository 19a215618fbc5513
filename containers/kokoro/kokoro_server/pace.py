"""The decoder pace windows are cut by (WindowPlan.pace): measured at warm-up, and again when the
engine is idle, so one figure taken while the machine was busy does not size every window."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

import numpy as np

from voicestream.protocol import NATIVE_SAMPLE_RATE

from .engines import Engine
from .g2p import Phonemizer
from .model_dir import style_for

WARM_UP_TEXT = "Hello, world."


def warm_up_pace(engine: Engine, phonemizer: Phonemizer, *, voice: str, pack: np.ndarray, runs: int = 3) -> float:
    """``decoder_pace`` on the warm-up sentence: the pace a server measures at warm-up."""
    chunk = phonemizer.phonemize(WARM_UP_TEXT, voice=voice)[0]
    return decoder_pace(engine, chunk, style_for(pack, chunk), runs=runs)


def decoder_pace(engine: Engine, phonemes: str, style: np.ndarray, *, runs: int = 3) -> float:
    """The decoder's seconds per second of audio: the median of ``runs`` one-shot decodings of
    ``phonemes`` (the front excluded; WindowPlan.pace)."""
    paces = []
    for _ in range(runs):
        decoding = engine.begin(phonemes, style, 1.0, plan=None)
        started = time.perf_counter()
        audio = decoding.rest()
        paces.append((time.perf_counter() - started) * NATIVE_SAMPLE_RATE / max(1, audio.size))
    return float(np.median(paces))


PACE_INTERVAL_S = 30.0
"""At most one idle re-measurement of the decoder pace per this long: each costs one decoding of
the warm-up sentence (~1 s of audio), and a job that arrives meanwhile waits for it."""
PACE_FIGURES = 5


class PaceMeter:
    """The decoder pace windows are cut by: the median of the last PACE_FIGURES figures, the
    warm-up's and those measured since when the engine was idle (every PACE_INTERVAL_S at most).
    One warm-up figure taken while the machine was busy made every later first window large."""

    def __init__(self, *, remeasure: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.remeasure = remeasure
        self.figures: collections.deque[float] = collections.deque(maxlen=PACE_FIGURES)
        self._clock = clock
        self._last = clock()

    def due(self) -> bool:
        return self.remeasure and self._clock() - self._last >= PACE_INTERVAL_S

    def add(self, figure: float) -> float:
        """Record a measured pace; return the pace to cut windows by now."""
        self.figures.append(figure)
        self._last = self._clock()
        return self.current

    @property
    def current(self) -> float:
        return float(np.median(self.figures)) if self.figures else 0.0
