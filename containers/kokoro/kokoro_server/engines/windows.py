"""Windowed decoding: cut an utterance's frames into growing windows and join their audio.

Kokoro's decoder turns aligned features (25 ms frames) into audio. Run over the whole utterance it
makes the listener wait for the last frame before hearing the first; run over windows, the first
window's audio can play while the rest is decoded. A window is decoded with ``context`` frames of
its neighbours on both sides (the decoder's convolutions see what they would see in one pass),
and neighbouring windows overlap by ``crossfade`` frames blended with raised-cosine ramps, so a
seam does not click. The defaults come from bench/windowing.py (bench/results/windowing.json).

Only numpy here: an engine runs its front once, then hands :class:`Decoding` a function that
decodes frames [lo, hi); each :meth:`Decoding.step` decodes one window and returns the audio that
is final, so the caller can send it before the next window is decoded.
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

HEADROOM = 0.7
"""Of the audio queued ahead of a window, the share its decoding may take (WindowPlan.pace): in
the server a window decoded 14-24 % slower than warm-up measured the decoder alone (G2P, encoding
and sends share the cores), and with 0.8 the second window still took 91 % of the first's audio."""


PACED_GROWTH_FLOOR = 2.0
"""A pace never cuts a window below twice the frames before it: smaller windows spend most of
their decoding on context and fall further behind. Without this floor a measured pace of 0.25
held every window to 20 frames (each decoding 60), and four sessions arriving at random stalled
34.5 s per audio minute against 0.26 s without a pace. Applied to a chunk that follows earlier
audio, twice the frames its speech made (most of them heard) cut a 3 s window whose decoding
outlasts the 2.3 s queued on the int8 CPU model (pace 0.66): a gap at the sentence boundary.
There the windows the listener's queue covers (FLOOR_SHARE) come first, unless they take more than
one window more or that queue covers none."""


FLOOR_SHARE = 0.8
"""Of the audio a listener really has queued when a chunk that follows earlier audio starts, the
share one of its windows may take to decode (``plan_windows``'s ``queued``). More than HEADROOM,
which prices windows from a queue the plan only models: each window as large as that audio
covers, so fewer windows and less context decoded twice on a CPU near real time. 0.8: a window in
the server decoded up to 24 % slower than the pace measured (HEADROOM), and 1/1.24 is 0.8."""


ONE_SHOT_SHARE = 0.8
"""A chunk whose first window would decode at least this share of its frames is one window: its
first audio would come barely sooner (a short sentence at a slow pace: 92 of 136 frames and 20 of
context at pace 1.0) while the rest decodes context twice, so one shot is as early and cheaper."""


@dataclass(frozen=True, kw_only=True)
class WindowPlan:
    """How to cut frames into windows: ``first`` frames first (more at a slow pace), then each
    window ``growth`` times all the frames before it (the audio a listener has buffered while it is
    decoded), at most ``largest``; a remainder shorter than ``first`` joins the last window. Fewer, larger windows
    differ less from one shot (the decoder normalises over each window's whole length): growth 4
    gave the 37-word sentence the lowest distance from one shot of the plans tried, with no stall on
    a 2-core CPU, and the 6-word one a fourth of growth 2's (bench/results/windowing.json). That
    no-stall is decoding alone: in the server on the same CPU the second window (80 frames and 40 of
    context) took 0.47-0.57 s against the first one's 0.5 s of audio (docs/benchmarks.md)."""

    first: int = 20
    growth: float = 4.0
    largest: int = 480
    context: int = 20
    crossfade: int = 8
    continued: int = 160
    """At most this many frames (and at most ``largest``) in the first window of a chunk that
    follows earlier audio of its speech: a sentence of up to 4 s after the first is one window (exactly the
    one-shot render), and no such window holds the engine long enough to starve other sessions (on a 2-core CPU,
    4 sessions arriving at random stalled about 6.4 s per audio minute with 480 here, 1.2 s with
    160, round-robin 2.5 s: medians of bench/design.py arrival runs, made before a speech queued its
    next window from the scheduler's completion hook). Paired again since, 240 against 160 (six
    start patterns, pace 0.22): stall alike (2 sessions none; 4 sessions 10.1 against 9.0 s per
    audio minute), median p95 first audio at 4 sessions 1.47 against 1.29 s."""

    continued_alone: int = 480
    """``continued`` for a chunk whose longer window holds up no other listener: no other session
    has work, or every one that has has enough audio queued to hear meanwhile (synth.window_cap).
    The cap keeps a long window from holding up other listeners; where none waits it only costs,
    since a chunk cut at the cap decodes its context twice, and it limits how many sentences a
    speech joins into one model job (speech.py). 480 (``largest``) rather than 240: fewer model
    calls per paragraph (docs/throughput.md has the measurements). History: docs/design-notes.md."""

    carry: int = 60
    """A speech that starts while its owner's listener still has at least this many frames of
    earlier audio queued (a session's next utterance, spoken while the one before it plays) plans
    its windows as if it followed that many frames of its own: its listener has them to hear
    meanwhile. Restarting at ``first`` frames instead decoded 46 % more frames than the agent
    answer's utterances hold (context decoded twice), 17 % when carried (bench/design.py's load
    scenario). 60 frames (1.5 s) covers a carried first window (``continued`` frames and context)
    on a 2-core CPU (pace up to 0.25: ~1.1 s). 0: every speech starts small."""

    pace: float = 0.0
    """The decoder's seconds per second of audio on this machine (0: no limit). With it, no window
    after the first decodes (its frames and context) for longer than HEADROOM of the audio the
    listener has queued by then, assuming the windows run back to back, down to PACED_GROWTH_FLOOR,
    and a speech's first window is as large as that needs (windows._paced_first):
    on 2 CPU cores the decoder runs at ~0.15-0.25 and growth 4 alone made the second window (80
    frames and 40 of context) take 0.47-0.57 s against the first's 0.5 s of audio. A GPU's pace
    leaves growth to decide. Measured at warm-up unless KOKORO_DECODER_PACE says otherwise: docs/models.md.
    With ``overhead``, the pace is what each frame adds to a decoder call (pace.DecoderCost)."""

    overhead: float = 0.0
    """Seconds one decoder call costs whatever its frames (pace.DecoderCost): a window of ``n``
    decoded frames takes ``overhead + n * FRAME_S * pace`` (:meth:`decode_s`). On the tiny CPU model
    (bench/results/profile-torch.json) a call cost 0.043 s plus 1.1 ms a frame, and the warm-up pace
    alone (1.7 ms a frame) priced a 480-frame window at 0.82 s against 0.57 s measured. The int8
    onnx model on the CPU has no fixed part (profile-onnx.json). 0: linear."""

    def __post_init__(self) -> None:
        if not self.pace >= 0:
            raise ValueError(f"pace: must be 0 or more seconds per audio second, got {self.pace!r}")
        if not self.overhead >= 0:
            raise ValueError(f"overhead: must be 0 or more seconds per decoder call, got {self.overhead!r}")
        if self.carry < 0:
            raise ValueError(f"carry: must be 0 or more frames, got {self.carry}")
        for name in ("first", "largest", "context"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be at least 1 frame, got {getattr(self, name)}")
        if not 0 <= self.crossfade <= self.context:
            raise ValueError(f"crossfade: must be 0..context ({self.context}) frames, got {self.crossfade}")
        if self.growth < 1:
            raise ValueError(f"growth: must be at least 1, got {self.growth}")
        if self.largest < self.first:
            raise ValueError(f"largest: must be at least first ({self.first}), got {self.largest}")
        if self.continued < self.first:
            raise ValueError(f"continued: must be at least first ({self.first}), got {self.continued}")
        if self.continued_alone < self.continued:
            raise ValueError(
                f"continued_alone: must be at least continued ({self.continued}), got {self.continued_alone}"
            )

    def decode_s(self, frames: int) -> float:
        """Seconds the decoder takes for a window of ``frames`` decoded frames (own and context)."""
        return self.overhead + frames * FRAME_S * self.pace

    def frames_within(self, seconds: float) -> int:
        """The most decoded frames one window may hold for its decoding to take at most ``seconds``
        (the plan has a pace)."""
        return max(0, int((seconds - self.overhead) / FRAME_S / self.pace + 1e-9))  # 1e-9: float round-off


@dataclass(frozen=True)
class Window:
    """Frames [start, end) are this window's own; [lo, hi) are decoded (own plus context). Its
    audio reaches ``tail`` frames past ``end``, where it is blended with the next window's."""

    start: int
    end: int
    lo: int
    hi: int
    tail: int


def plan_windows(
    frames: int, plan: WindowPlan | None, *, before: int = 0, queued: float | None = None,
) -> list[Window]:
    """The windows covering ``frames`` frames, in order; one window when ``plan`` is None.

    ``before``: frames the same speech made ahead of these (its earlier chunks). Windows grow with
    all the audio before them, so a chunk that follows enough audio is one window: its listener
    has that audio to hear while the chunk is decoded, and gets exactly the one-shot render.
    ``queued``: frames of audio the listener still has to hear when the chunk's first window
    starts (with a pace; None: all of ``before``). A speech's first window is ``plan.first``
    frames, or more where the pace needs it (:func:`_paced_first`)."""
    if frames < 1:
        raise ValueError(f"frames: must be at least 1, got {frames}")
    if before < 0:
        raise ValueError(f"before: must be 0 or more frames, got {before}")
    if queued is not None and not queued >= 0:
        raise ValueError(f"queued: must be 0 or more frames, got {queued!r}")
    if plan is None:
        return [Window(0, frames, 0, frames, 0)]
    first = _paced_first(frames, plan) if plan.pace and not before else plan.first
    queued = before if queued is None else queued
    bounds = _bounds(frames, plan, before=before, first=first, queued=queued)
    if before and plan.pace:  # windows the listener's queue covers, unless they cost many more
        covered = _covered_bounds(frames, plan, queued=queued)
        if covered is not None and len(covered) <= len(bounds) + 1:
            return _windows(covered, frames, plan)  # one shot only where the queue covers it all
    windows = _windows(bounds, frames, plan)
    if len(windows) > 1 and windows[0].hi - windows[0].lo >= ONE_SHOT_SHARE * frames:
        return [Window(0, frames, 0, frames, 0)]  # the first window is nearly all of it: one shot
    return windows


def _bounds(frames: int, plan: WindowPlan, *, before: int, first: int, queued: float) -> list[int]:
    """Where the windows end. ``queued``: frames the listener has when the next window starts (pace)."""
    bounds = [0]
    while bounds[-1] < frames:
        done = bounds[-1]
        made = before + done
        cap = min(plan.continued, plan.largest) if done == 0 else plan.largest
        in_time = _frames_in_time(queued, plan)
        allowed = max(plan.first, in_time, int(round(PACED_GROWTH_FLOOR * made)))
        if made == 0:
            size = first  # a first window is always allowed
        else:  # growth, or with a pace as much as the listener's queued audio covers
            paced = in_time if plan.pace else 0
            size = min(cap, max(min(max(plan.first, int(round(plan.growth * made))), allowed), paced))
        end = done + size
        if frames - end < plan.first:  # too little left for a window of its own
            end = frames
            if plan.pace and made and frames - done > allowed + plan.context and frames - done >= 2 * plan.first:
                end = frames - plan.first  # the joined window would outrun the listener: a last small one
        bounds.append(end)
        queued = (end - done) if made == 0 else _queued_after(queued, done, end, frames, plan)
    return bounds


def _covered_bounds(frames: int, plan: WindowPlan, *, queued: float) -> list[int] | None:
    """Where the windows of a chunk that follows earlier audio end, each as large as FLOOR_SHARE
    of the ``queued`` frames its listener has when it starts covers (within ``continued`` first,
    then ``largest``); None where that queue cannot cover ``first`` frames at some window: then the
    listener runs dry at any size, and the growth floor's fewer, larger windows waste less."""
    bounds = [0]
    while bounds[-1] < frames:
        done = bounds[-1]
        cap = min(plan.continued, plan.largest) if done == 0 else plan.largest
        own = min(cap, plan.frames_within(FLOOR_SHARE * queued * FRAME_S) - plan.context * (2 if done else 1))
        if own < plan.first:
            return None
        end = frames if frames - (done + own) < plan.first else done + own  # a short rest joins this one
        bounds.append(end)
        queued = _queued_after(queued, done, end, frames, plan)
    return bounds


def _queued_after(queued: float, start: int, end: int, frames: int, plan: WindowPlan) -> float:
    """Frames the listener has queued once the window [start, end) of ``frames`` is decoded (at
    the plan's cost, with its context) and its audio added, from ``queued`` when it started."""
    decoded = end - start + (plan.context if start else 0) + (plan.context if end < frames else 0)
    return max(0.0, queued - plan.decode_s(decoded) / FRAME_S) + (end - start)


def _windows(bounds: list[int], frames: int, plan: WindowPlan) -> list[Window]:
    windows = []
    for start, end in zip(bounds, bounds[1:]):
        last = end >= frames
        windows.append(Window(
            start, end, max(0, start - plan.context),
            frames if last else min(frames, end + plan.context), 0 if last else plan.crossfade,
        ))
    return windows


def keeps_up(windows: list[Window], plan: WindowPlan) -> bool:
    """Whether a decoder at ``plan``'s cost, decoding ``windows`` back to back, takes at most HEADROOM of
    the audio queued when each window after the first starts (playback from the first's end)."""
    clock, made, played_from = 0.0, 0, None
    for window in windows:
        decode = plan.decode_s(window.hi - window.lo) / FRAME_S
        if played_from is not None and decode > HEADROOM * (made - (clock - played_from)) + 1e-9:
            return False
        clock += decode
        played_from = clock if played_from is None else played_from
        made += window.end - window.start
    return True


FIRST_TRADE = 2.0
"""A speech's first window takes up to ``first`` frames more where that saves this many times the
decoding it adds before first audio: one window fewer, so one call's fixed cost and its context
frames less (at 0.1 s a call and pace 0.048, a 475-frame sentence is cut 38 + 437 instead of
20 + 168 + 287: 22 ms more before first audio for 0.15 s less decoding; tests/kokoro/test_windows.py)."""


def _paced_first(frames: int, plan: WindowPlan) -> int:
    """The smallest first window, from ``plan.first`` up to ``plan.continued`` frames, after which
    the windows keep up with the pace (:func:`keeps_up`); ``plan.continued`` if none does. Past a
    pace of ~0.17 on 2 CPU cores, 20 frames (0.5 s) do not cover the next window at the
    doubling floor (40 frames and 40 of context): the listener would run dry in the sentence's
    first second, alone on the engine. Then up to ``plan.first`` frames more where that pays
    (FIRST_TRADE)."""
    most = min(frames, plan.continued, plan.largest)
    for first in range(plan.first, most + 1):
        windows = _windows(_bounds(frames, plan, before=0, first=first, queued=0.0), frames, plan)
        if keeps_up(windows, plan):
            break
    else:
        return most
    best, best_s, first_s = first, _decode_s(windows, plan), plan.decode_s(windows[0].hi - windows[0].lo)
    for more in range(first + 1, min(most, first + plan.first) + 1):
        windows = _windows(_bounds(frames, plan, before=0, first=more, queued=0.0), frames, plan)
        spent = _decode_s(windows, plan)
        added = plan.decode_s(windows[0].hi - windows[0].lo) - first_s
        if best_s - spent >= FIRST_TRADE * added and keeps_up(windows, plan):
            best, best_s = more, spent
    return best


def _decode_s(windows: list[Window], plan: WindowPlan) -> float:
    return sum(plan.decode_s(w.hi - w.lo) for w in windows)


def _frames_in_time(queued: float, plan: WindowPlan) -> int:
    """Own frames a window may have so that decoding them and their context takes at most HEADROOM
    of the ``queued`` frames' playing time (any number without a pace)."""
    if not plan.pace:
        return 1 << 30
    return plan.frames_within(HEADROOM * queued * FRAME_S) - 2 * plan.context


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
    """An engine's decoder over frames [lo, hi), stopping early when ``halt`` is set (halt.py)."""

    def __call__(self, lo: int, hi: int, halt: Halt | None = None) -> np.ndarray: ...


class Decoding:
    """One utterance after the front ran: ``step`` decodes the next window and returns its final
    audio. ``durations`` (frames per token) is known from the start. Steps are serialized."""

    def __init__(
        self, *, frames: int, decode: Decode, plan: WindowPlan | None,
        durations: np.ndarray | None = None,
    ) -> None:
        self.frames = frames
        self.durations = durations
        self.samples_per_frame = 0  # known after the first step (word timestamps map frames to samples)
        self._before = 0  # frames the speech made ahead of this chunk (follow)
        self._queued: float | None = None  # frames its listener has still to hear as it starts (follow)
        self._windows: list[Window] | None = None  # planned on first use: follow may change ``before``
        self.decode = decode  # frames [lo, hi) -> audio, no crossfade: for measurements
        self._next = 0
        self.decoded_last = 0  # frames the last step decoded (its own and context): PaceMeter fits to them
        self._joiner: Joiner | None = None
        self._plan = plan
        self._crossfade = 0 if plan is None else plan.crossfade
        self._lock = threading.Lock()

    def follow(self, frames_before: int, *, queued: float | None = None) -> None:
        """This chunk continues a speech that already made ``frames_before`` frames, and its
        listener has ``queued`` frames still to hear: plan its windows from there (before the first
        step; plan_windows's ``before`` and ``queued``)."""
        with self._lock:
            if self._next:
                raise RuntimeError("follow: a window is already decoded")
            self._before, self._queued, self._windows = frames_before, queued, None

    @property
    def windows(self) -> list[Window]:
        """The chunk's windows, planned once (a first window sized to the pace costs a search)."""
        if self._windows is None:
            self._windows = plan_windows(self.frames, self._plan, before=self._before, queued=self._queued)
        return self._windows

    @property
    def done(self) -> bool:
        return self._next >= len(self.windows)

    @property
    def remaining(self) -> int:
        return len(self.windows) - self._next

    @property
    def rest_frames(self) -> int:
        """Frames the windows left would decode in one window (their own and the context before)."""
        return 0 if self.done else self.frames - self.windows[self._next].lo

    def join_rest(self) -> bool:
        """Decode every window left as one (the next ``step`` ends the chunk): its listener has
        enough audio queued to hear meanwhile, and the joined window decodes no context twice.
        False when at most one window is left."""
        with self._lock:
            if self.remaining <= 1:
                return False
            window = self.windows[self._next]
            self._windows = [*self.windows[:self._next], Window(window.start, self.frames, window.lo, self.frames, 0)]
            return True

    def step(self, halt: Halt | None = None) -> np.ndarray:
        """Decode the next window; ``halt`` stops it early (Halted, and the window is not done)."""
        with self._lock:
            if self.done:
                raise RuntimeError("every window is already decoded")
            window = self.windows[self._next]
            decoded = np.asarray(self.decode(window.lo, window.hi, halt), dtype=np.float32).reshape(-1)
            per_frame, rest = divmod(decoded.size, window.hi - window.lo)
            if rest or per_frame == 0:
                raise ValueError(f"decoder returned {decoded.size} samples for {window.hi - window.lo} frames")
            self.samples_per_frame = per_frame
            self.decoded_last = window.hi - window.lo
            if self._joiner is None:
                self._joiner = Joiner(crossfade_samples=self._crossfade * per_frame)
            own = decoded[(window.start - window.lo) * per_frame:(window.end + window.tail - window.lo) * per_frame]
            self._next += 1
            return self._joiner.add(own, tail_samples=window.tail * per_frame)

    def rest(self) -> np.ndarray:
        """Decode every window left and return their audio joined (one-shot callers)."""
        parts = [self.step() for _ in range(self.remaining)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
