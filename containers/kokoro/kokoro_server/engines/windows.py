"""Windowed decoding: decode a chunk's frames a window at a time and join their audio.

Kokoro's decoder turns aligned features (25 ms frames) into audio. Run over the whole chunk it
makes the listener wait for the last frame before hearing the first; run over windows, the first
window's audio can play while the rest is decoded. Neighbouring windows overlap by CROSSFADE frames
blended with raised-cosine ramps, so a seam does not click.

The decoder has two parts with different reach. Its body (convolutions and instance norms over
1024 channels at the frame rate) sees FEATURE_CONTEXT frames of features on each side of what it
decodes; the vocoder after it (upsampling to 24 kHz, about 96 % of a window's time on the int8
model: bench/results/windowing.json, ``vocoder_share``) reaches about 4 frames, so it renders only
CONTEXT frames of audio beyond a window's own (and its crossfade tail) on each side, except after
a chunk's first window (OPENING_CONTEXT). An engine's :class:`Decode` renders frames [lo, hi) with
the body's context around them: a seam after the first renders 20 frames twice where it rendered
40. The constants come from bench/windowing.py (bench/results/windowing.json).

Only the mechanics live here: how large each window is, is the job sizer's decision
(kokoro_server/sizing.py), passed to each :meth:`Decoding.step`; what each window renders around
its own frames is :class:`Seams`, which the sizer prices windows by. An engine runs its front once,
then hands :class:`Decoding` a function that decodes frames [lo, hi); each step decodes one window
and returns the audio that is final, so the caller can send it before the next window is decoded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from .halt import Halt

FRAME_S = 0.025
"""One frame of Kokoro's aligned features: 600 samples of 24 kHz audio (both engines)."""

CONTEXT = 6
"""Frames of audio rendered beyond each side of a window (past its crossfade tail on the right) and
thrown away: the vocoder's reach, so its edges sound as in one pass."""
CROSSFADE = 8
"""Frames over which neighbouring windows are blended (raised-cosine ramps): no click at a seam."""
FEATURE_CONTEXT = 20
"""Frames of features the decoder's body sees on each side of the frames it renders (an engine's
:class:`Decode`; clipped at the chunk's ends)."""
OPENING_CONTEXT = FEATURE_CONTEXT
"""Frames of audio rendered past a chunk's first window and its crossfade tail. The vocoder
normalises over the span it renders, and a first window is short: with CONTEXT there, the first
words of a short sentence cut in two were heard wrong ("Meet me at nine fifteen" as "maybe at nine
fifteen", tests/kokoro/test_normalize_by_ear.py), as they were not with the body's whole context."""


def feature_span(lo: int, hi: int, frames: int, context: int = FEATURE_CONTEXT) -> tuple[int, int]:
    """The feature frames an engine decodes to render frames [lo, hi) of a chunk of ``frames``."""
    return max(0, lo - context), min(frames, hi + context)


@dataclass(frozen=True)
class Window:
    """Frames [start, end) are this window's own; [lo, hi) are rendered (own, tail and context). Its
    audio reaches ``tail`` frames past ``end``, where it is blended with the next window's."""

    start: int
    end: int
    lo: int
    hi: int
    tail: int


@dataclass(frozen=True)
class Seams:
    """What a window renders beyond its own frames: ``context`` before it (none before a chunk's
    first) and, unless it is its chunk's last, its ``crossfade`` tail and ``context`` after it
    (``opening`` after a chunk's first). The one place this is decided: :class:`Decoding` renders
    by it and the job sizer prices windows by it (sizing.Profile)."""

    context: int = CONTEXT
    crossfade: int = CROSSFADE
    opening: int = OPENING_CONTEXT

    def __post_init__(self) -> None:
        if min(self.context, self.crossfade, self.opening) < 0:
            raise ValueError(f"context, opening and crossfade: must be 0 or more frames, got {self.context}, "
                             f"{self.opening} and {self.crossfade}")

    def before(self, started: bool) -> int:
        """Frames rendered before a window (``started``: it is not its chunk's first)."""
        return self.context if started else 0

    def after(self, started: bool) -> int:
        """Frames rendered after a window that is not its chunk's last."""
        return self.crossfade + (self.context if started else self.opening)

    def rendered(self, own: int, *, started: bool, last: bool) -> int:
        """Frames a window of ``own`` frames renders, its context and tail included: its price."""
        return self.before(started) + own + (0 if last else self.after(started))

    @property
    def middle(self) -> int:
        """Frames a window with windows on both sides renders beyond its own: a seam's price."""
        return self.before(True) + self.after(True)

    def window(self, start: int, own: int, frames: int) -> Window:
        """The window of ``own`` frames from ``start`` in a chunk of ``frames``, clipped to it."""
        end = min(frames, start + own)
        lo = max(0, start - self.before(start > 0))
        if end >= frames:
            return Window(start, end, lo, frames, 0)
        return Window(start, end, lo, min(frames, end + self.after(start > 0)), min(self.crossfade, frames - end))


class Joiner:
    """Join windows' audio with crossfades; ``add`` returns the samples that are final now."""

    def __init__(self, *, crossfade_samples: int) -> None:
        phase = (np.arange(crossfade_samples, dtype=np.float64) + 0.5) / max(crossfade_samples, 1)
        # Both sides carry nearly the same signal (the same frames decoded twice), so the ramps sum
        # to 1 (equal gain); equal-power ramps would lift the level by up to 3 dB at the seam.
        self._fade_in = (np.sin(0.5 * np.pi * phase) ** 2).astype(np.float32)
        self._fade_out = (1.0 - self._fade_in).astype(np.float32)
        self._held = np.zeros(0, dtype=np.float32)

    def add(self, audio: np.ndarray, *, tail_samples: int) -> np.ndarray:
        """``audio`` runs from its window's start to ``tail_samples`` past its end."""
        audio = np.asarray(audio, dtype=np.float32)
        held = self._held
        if held.size:
            n = min(held.size, audio.size)
            head = held[:n] * self._fade_out[:n] + audio[:n] * self._fade_in[:n]
            audio = np.concatenate([head, audio[n:]])
        if tail_samples:
            self._held = audio[-tail_samples:].copy()
            return audio[:-tail_samples]
        self._held = np.zeros(0, dtype=np.float32)
        return audio


class Decode(Protocol):
    """An engine's decoder: the audio of frames [lo, hi), its body seeing ``reach`` frames of
    features around them (:func:`feature_span`; 0: the model run on those frames alone, as one shot
    over a shorter chunk); it stops early when ``halt`` is set (halt.py)."""

    def __call__(self, lo: int, hi: int, halt: Halt | None = None, *, reach: int = FEATURE_CONTEXT) -> np.ndarray: ...


class Decoding:
    """One chunk after the front ran: each ``step`` decodes its next window and returns the
    audio that is final. ``durations`` (frames per token) is known from the start. Steps are
    serialized (one job of a chunk runs at a time)."""

    def __init__(
        self, *, frames: int, decode: Decode, durations: np.ndarray | None = None, seams: Seams = Seams(),
    ) -> None:
        if frames < 1:
            raise ValueError(f"frames: must be at least 1, got {frames}")
        self.frames = frames
        self.durations = durations
        self.samples_per_frame = 0  # known after the first step (word timestamps map frames to samples)
        self.decode = decode  # frames [lo, hi) -> audio, no crossfade: for measurements
        self.decoded_last = 0  # frames the last step rendered (own, tail and context): the cost is fitted to them
        self.windows: list[Window] = []  # decoded so far, in order
        self.seams = seams
        self._next = 0
        self._joiner: Joiner | None = None
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        return self._next >= self.frames

    @property
    def left(self) -> int:
        """Frames not decoded yet."""
        return self.frames - self._next

    @property
    def started(self) -> bool:
        """A window was decoded: the next one has context on both sides."""
        return self._next > 0

    def step(self, own: int, halt: Halt | None = None) -> np.ndarray:
        """Decode the next window, of ``own`` frames (fewer if fewer are left); ``halt`` stops it
        early (Halted, and the window is not done)."""
        if own < 1:
            raise ValueError(f"own: a window has at least 1 frame, got {own}")
        with self._lock:
            if self.done:
                raise RuntimeError("every window is already decoded")
            w = self.seams.window(self._next, own, self.frames)
            decoded = np.asarray(self.decode(w.lo, w.hi, halt), dtype=np.float32).reshape(-1)
            per_frame, rest = divmod(decoded.size, w.hi - w.lo)
            if rest or per_frame == 0:
                raise ValueError(f"decoder returned {decoded.size} samples for {w.hi - w.lo} frames")
            self.samples_per_frame = per_frame
            self.decoded_last = w.hi - w.lo
            if self._joiner is None:
                self._joiner = Joiner(crossfade_samples=self.seams.crossfade * per_frame)
            own_audio = decoded[(w.start - w.lo) * per_frame:(w.end + w.tail - w.lo) * per_frame]
            self._next = w.end
            self.windows.append(w)
            return self._joiner.add(own_audio, tail_samples=w.tail * per_frame)

    def rest(self) -> np.ndarray:
        """Decode every frame left as one window (one-shot callers)."""
        return self.step(self.left) if not self.done else np.zeros(0, dtype=np.float32)
