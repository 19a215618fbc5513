"""How many frames the next model job decodes: one policy, from what the listeners have queued and
what a decoder call costs.

The model runs one job at a time, and a job decodes one window of a chunk (a sentence's 25 ms
frames), plus context decoded and thrown away so the window's edges sound as in one pass
(engines/windows.py's Seams, which the profile prices windows by). Larger
windows cost less per frame (a call's fixed cost and its context are paid once per window) but
hold the engine longer, and meanwhile this speech's listener, and every other listener with work
queued, must have audio to hear. So:

1. **A free decoder** (no cost known: pace 0) decodes the rest of the chunk in one window.
2. **A short chunk** whose listener has nothing queued yet is one window when all of it decodes
   within ``first_audio_s``: splitting it would bring its first audio barely sooner and decode
   context twice.
3. **The queue covers the rest**: when ``headroom`` of the listener's queued audio covers
   decoding all the chunk has left, that is one window (exactly the one-shot render, no context
   decoded twice): a sentence spoken while earlier audio plays, a chunk's end.
4. **A chunk's first window** otherwise is a trade: a larger one makes the listener wait longer
   for it, a smaller one makes more windows and so more decoding. Of the sizes after which the
   listener never waits again (each later window sized by rule 5, simulated at the decoder's cost),
   the one with the least decoding plus ``first_audio_weight`` times the wait for its audio. Its
   silent lead (the chunk's first frames, which the listener does not hear: lead.py) queues none. When
   no size keeps up (the decoder is slower than the listener hears), the least of the same sum. A
   listener already hearing audio (a sentence after earlier ones) does not wait at all: its first
   window decodes within ``headroom`` of its queue, where any window does.
5. **A later window** takes what ``headroom`` of the queued audio covers: its decoding ends while
   the listener still has audio. A queue that covers less than ``first_frames`` means the decoder
   has fallen behind: the listener waits either way, and the largest windows rule 7 allows waste
   the least.
6. **Other listeners**: while another listener has work, a window decodes in at most ``headroom``
   of the least audio any of them has queued, but is never so small that more than
   ``contention_waste`` of its decoding is what nobody hears (its context, the call's fixed cost).
   A newcomer waiting for its first audio has none queued, and neither has a listener the decoder
   has fallen behind for: windows cut to their queues would spend the decoder on context just when
   it has too little time, and everyone would wait longer. While the others' queues leave no more
   than that floor, it holds for this listener's own windows too, and for the rest each leaves,
   once it has heard audio (it has some queued, or ``ran_dry``): rules 4 and 5 would cut windows
   to its queue, mostly context, which the others then wait for (docs/throughput.md: four
   paragraphs at once). A speech's first window is still rule 4's trade, and a listener short of
   audio while the others have plenty still gets the small window its queue covers.
7. **Bounds**, whatever rule sized the window: its decoding takes at most ``longest_s`` (a
   listener who arrives meanwhile waits for it, and no rule sees one coming), unless a window that
   short is not worth its call (rule 6's floor: the decoder is slow), and it holds at most
   ``largest`` frames; at least ``first_frames`` (smaller windows are mostly context). A rest
   shorter than ``first_frames`` joins the window before it, and so does a rest that ``longest_s``
   would leave too short to be worth a call (rule 6's floor), while the chunk's rest is within
   ``largest``: a window may pass ``longest_s`` by that much, never ``largest`` by more than
   ``first_frames``.

:func:`next_window` is the size of a chunk's next window; :func:`job_frames` what one job may hold
when a speech joins the sentences G2P has ready into one job (speech.py). No model, thread or
clock in here: the synthesizer reads the situation and asks; tests/kokoro/test_sizing.py is a
table of situations and the sizes they get. The options are a :class:`Profile`; :data:`PROFILES`
names the measured ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from .engines.windows import FRAME_S, Seams


@dataclass(frozen=True, kw_only=True)
class Cost:
    """What one decoder call costs: ``overhead`` seconds whatever its frames, plus ``pace``
    seconds per second of audio it decodes (pace.PaceMeter measures both). Pace 0: unknown, or a
    decoder fast enough to count as free."""

    pace: float = 0.0
    overhead: float = 0.0

    def decode_s(self, frames: int) -> float:
        """Seconds a call decoding ``frames`` frames (own and context) takes."""
        return self.overhead + frames * FRAME_S * self.pace

    def frames_within(self, seconds: float) -> int:
        """The most frames one call may decode in ``seconds`` (a pace is known)."""
        return max(0, math.floor((seconds - self.overhead) / (FRAME_S * self.pace) + 1e-9))


@dataclass(frozen=True, kw_only=True)
class Profile:
    """The policy's options: a machine's trade between first audio, fairness and throughput."""

    first_frames: int = 20
    """The smallest window worth a call (0.5 s of audio)."""
    headroom: float = 0.7
    """Of the audio a listener has queued, the share one window may take to decode: a window decoded
    in the server runs up to 24 % slower than the decoder alone (G2P, encoding and sends share the
    cores; docs/design-notes.md)."""
    largest: int = 1200
    """The most frames one window decodes (30 s of audio): less than kokoro's own pipeline decodes
    in one call (a chunk of 510 phonemes, ~1300 frames of af_heart on the int8 model), so no window
    asks the decoder for more memory than kokoro would."""
    longest_s: float = 2.0
    """The most seconds one window may hold the decoder: a listener who arrives meanwhile waits for
    it before its own first window starts. On the int8 onnx model (pace ~0.3-0.42) that is ~150-230
    frames, near the 160 the window planner held a sentence after earlier audio to, after windows of
    480 frames (~4 s there) had four sessions arriving at random stall more (docs/design-notes.md);
    a decoder 20x faster (the tiny torch model) decodes a 35-word sentence in two windows."""
    first_audio_s: float = 0.25
    """A chunk whose whole decoding takes at most this is one window when its listener has nothing
    queued."""
    first_audio_weight: float = 1.0
    """What a second of waiting for a chunk's first window is worth in seconds of decoding."""
    contention_waste: float = 0.1
    """While another listener has work, the most of a window's decoding that may go to what nobody
    hears (context decoded twice, the call's fixed cost): the floor of rule 6, a window of at least
    9x (context + fixed cost) at 0.1: 180 frames on the int8 onnx model, whose seam renders 20
    frames twice. At 0.2 the floor was 160 there while a seam rendered 40 (the window planner's
    `continued`); with the cheaper seam 0.2 let it fall to 80, and four paragraphs at once decoded
    1.11x the frames heard in ~59 calls instead of 1.065x in 40, 1.14x a loop's time
    (docs/throughput.md). A floor of 1 s of decoding (~80 frames, 40 of context each) had read 1.2x."""
    seams: Seams = Seams()
    """What a window renders beyond its own frames (windows.py): part of its price. The windows
    decoded must render by the same (the engines' Decoding does, by default)."""

    def __post_init__(self) -> None:
        if self.first_frames < 1:
            raise ValueError(f"first_frames: must be at least 1, got {self.first_frames}")
        if self.largest < self.first_frames:
            raise ValueError(f"largest: must be at least first_frames ({self.first_frames}), got {self.largest}")
        if not self.longest_s > 0:
            raise ValueError(f"longest_s: must be more than 0, got {self.longest_s!r}")
        if not 0 < self.headroom <= 1:
            raise ValueError(f"headroom: must be in (0, 1], got {self.headroom!r}")
        for name in ("first_audio_s", "first_audio_weight"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: must be 0 or more, got {getattr(self, name)!r}")
        if not 0 < self.contention_waste < 1:
            raise ValueError(f"contention_waste: must be in (0, 1), got {self.contention_waste!r}")


PROFILES: dict[str, Profile] = {
    # 2 CPU cores (the int8 onnx model at a decoder pace of ~0.4, the tiny torch model at ~0.05 and
    # ~40 ms a call): the defaults, measured there (docs/throughput.md, docs/benchmarks.md).
    "cpu": Profile(),
    # A GPU (ml.g5's A10G): a whole sentence decodes in tens of ms, so rule 2 makes nearly every
    # chunk one window. Not measured on a GPU yet: the defaults are an assumption there
    # (docs/throughput.md).
    "gpu": Profile(),
}


def profile_for(device: str) -> Profile:
    """The profile of the device an engine runs on (``cuda...`` is a GPU)."""
    return PROFILES["gpu" if device.startswith("cuda") else "cpu"]


@dataclass(frozen=True, kw_only=True)
class Situation:
    """What the next window of a chunk is sized by.

    ``queued_s``: audio this speech's listener has made and not heard yet; ``cost``: the
    decoder's; ``left``: the chunk's frames not decoded yet; ``started``: the chunk already had a
    window (the next one has context on both sides); ``others_s``: the least audio queued for any
    other listener with work (0 for one waiting for its first audio), None when no other has work;
    ``ran_dry``: the listener has heard all the audio made for it and waits for more (the decoder
    fell behind), where ``queued_s`` 0 alone may be a speech that has not started; ``lead``: frames
    at the start of a chunk not yet started that its listener will not hear (its silence,
    lead.py): the first window's audio is that much shorter.
    """

    queued_s: float
    cost: Cost
    left: int = 0
    started: bool = False
    others_s: float | None = None
    ran_dry: bool = False
    lead: int = 0


class JobSizer(Protocol):
    """What the synthesizer asks: a window's size, and how much one joined job may hold. The
    server's is :class:`Sizer`; bench/variants.py holds the ones benchmarks compare it with."""

    def next_window(self, situation: Situation) -> int: ...

    def job_frames(self, situation: Situation) -> int: ...


@dataclass(frozen=True)
class Sizer:
    """The policy of this module with a profile's options."""

    profile: Profile = field(default_factory=Profile)

    def next_window(self, situation: Situation) -> int:
        return next_window(situation, self.profile)

    def job_frames(self, situation: Situation) -> int:
        return job_frames(situation, self.profile)


def next_window(situation: Situation, profile: Profile) -> int:
    """Own frames of the chunk's next window (the module's rules 1-7)."""
    s, p = situation, profile
    if s.left < 1:
        raise ValueError(f"left: must be at least 1 frame, got {s.left}")
    if s.cost.pace <= 0:
        return _bounded(s.left, s.left, s.cost, p)  # 1: a free decoder
    rest_s = s.cost.decode_s(p.seams.rendered(s.left, started=s.started, last=True))
    if s.queued_s <= 0 and not s.started and rest_s <= p.first_audio_s:
        return _bounded(s.left, s.left, s.cost, p)  # 2: a short chunk
    if _within(rest_s, p.headroom * s.queued_s):
        size = s.left  # 3: the queue covers the rest
    elif not s.started:
        size = _opening(s.left, s.queued_s, s.cost, p, lead=s.lead)  # 4
    else:
        size = _later(s.queued_s, s.cost, p) or _most(s.cost, p)  # 5 (behind: the most rule 7 allows)
    if s.others_s is not None:  # 6
        floor_s = _contended_floor_s(s.cost, p)
        allowed_s = max(p.headroom * s.others_s, floor_s)
        if not _within(s.cost.decode_s(p.seams.rendered(size, started=s.started, last=size >= s.left)), allowed_s):
            size = _covered(s.cost, allowed_s, p.seams.before(s.started) + p.seams.after(s.started))
        if allowed_s <= floor_s and (s.queued_s > 0 or s.ran_dry):  # no time to spare for context
            return _worth_its_context(_bounded(size, s.left, s.cost, p), s.left, s.cost, p)
    return _bounded(size, s.left, s.cost, p)  # 7


def job_frames(situation: Situation, profile: Profile) -> int:
    """Frames one job may hold when sentences ready join into it (decoded in one window, no
    context): what rules 3, 6 and 7 let one window decode; 0 while the listener
    has nothing queued (the speech's first audio comes from a window of rule 2 or 4) or the
    decoder is free (rule 1: every chunk is one window anyway)."""
    s, p = situation, profile
    if s.queued_s <= 0 or s.cost.pace <= 0:
        return 0
    allowed_s = p.headroom * s.queued_s
    if s.others_s is not None:
        allowed_s = min(allowed_s, max(p.headroom * s.others_s, _contended_floor_s(s.cost, p)))
    return min(_most(s.cost, p, context=0), _covered(s.cost, allowed_s, 0))


def sizes_alone(frames: int, sizer: JobSizer, cost: Cost, *, seams: Seams | None = None, lead: int = 0) -> list[int]:
    """The windows one listener alone gets for a chunk of ``frames`` from a speech's start, its
    queue as a decoder at ``cost`` leaves it (playback from the first window): what the policy
    does, without a model or a clock (benchmarks and tests read it). ``seams``: what that decoder
    renders around each window (by default what an engine's Decoding renders); ``lead``: the
    chunk's first frames not heard (lead.py)."""
    seams = seams or Seams()
    sizes: list[int] = []
    queued = 0.0
    while sum(sizes) < frames:
        done = sum(sizes)
        size = sizer.next_window(Situation(left=frames - done, queued_s=queued, cost=cost, started=bool(done),
                                           lead=0 if done else lead))
        end = min(frames, done + size)
        decoded = seams.rendered(end - done, started=bool(done), last=end >= frames)
        queued = max(0.0, queued - cost.decode_s(decoded)) + _heard(end - done, 0 if done else lead) * FRAME_S
        sizes.append(end - done)
    return sizes


def _opening(left: int, queued_s: float, cost: Cost, p: Profile, *, lead: int = 0) -> int:
    """Rule 4: the first window with the least decoding plus ``first_audio_weight`` times the
    listener's wait for it, among those after which the listener never waits (else among all). A
    listener already hearing audio never waits for it: its first window decodes within ``headroom``
    of the queue where any does. The first ``lead`` frames of the chunk are not heard (lead.py):
    they queue no audio."""
    best = (False, False, math.inf, p.first_frames)  # (no stall, keeps up, score, size): in that order
    for first in range(p.first_frames, min(left, _most(cost, p, context=p.seams.after(False))) + 1):
        first_s = cost.decode_s(p.seams.rendered(first, started=False, last=first >= left))
        rest_s, keeps_up = _after(left - first, max(0.0, queued_s - first_s) + _heard(first, lead) * FRAME_S, cost, p)
        score = first_s + rest_s + p.first_audio_weight * max(0.0, first_s - queued_s)
        no_stall = queued_s <= 0 or _within(first_s, p.headroom * queued_s)
        if (no_stall, keeps_up, -score) > (best[0], best[1], -best[2]):
            best = (no_stall, keeps_up, score, first)
    return best[3]


def _heard(own: int, lead: int) -> int:
    """Frames of a window of ``own`` frames its listener hears when its first ``lead`` are not
    sent (lead.py; 0 but for a chunk's first window)."""
    return max(0, own - lead)


def _after(left: int, queued_s: float, cost: Cost, p: Profile) -> tuple[float, bool]:
    """Decoding ``left`` frames in later windows (rules 3 and 5) from ``queued_s`` of queued audio:
    the seconds it takes, and whether every window decodes within its queue."""
    spent, keeps_up = 0.0, True
    while left > 0:
        rest_s = cost.decode_s(p.seams.rendered(left, started=True, last=True))
        if _within(rest_s, p.headroom * queued_s):
            return spent + rest_s, keeps_up
        covered = _later(queued_s, cost, p)
        keeps_up = keeps_up and covered is not None
        own = _bounded(covered or _most(cost, p), left, cost, p)
        window_s = cost.decode_s(p.seams.rendered(own, started=True, last=own >= left))
        spent += window_s
        queued_s = max(0.0, queued_s - window_s) + own * FRAME_S
        left -= own
    return spent, keeps_up


def _later(queued_s: float, cost: Cost, p: Profile) -> int | None:
    """Rule 5: the own frames ``headroom`` of the queue covers; None when that is no useful window
    (the decoder has fallen behind)."""
    own = _covered(cost, p.headroom * queued_s, p.seams.middle)
    return own if own >= p.first_frames else None


def _contended_floor_s(cost: Cost, p: Profile) -> float:
    """Rule 6's floor: the decoding of the smallest middle window worth its call."""
    return cost.decode_s(_worth_a_call(cost, p) + p.seams.middle)


def _worth_a_call(cost: Cost, p: Profile) -> int:
    """Own frames of the smallest middle window whose context and fixed cost are at most
    ``contention_waste`` of its decoding (own >= (1 - waste) / waste x what nobody hears)."""
    unheard = p.seams.middle + cost.overhead / (FRAME_S * cost.pace)  # in frames' worth of decoding
    return math.ceil(unheard * (1 - p.contention_waste) / p.contention_waste)


def _worth_its_context(size: int, left: int, cost: Cost, p: Profile) -> int:
    """Rule 6's floor for a listener that has heard audio, while the others have none to spare: no
    window smaller than one worth a call, and no rest left that is not (the whole chunk instead,
    where rule 7's bound allows it)."""
    worth = _worth_a_call(cost, p)
    size = max(size, min(worth, left))
    if (left - size < worth and left <= _most(cost, p)) or left - size < p.first_frames:
        return left
    return size


def _within(decode_s: float, allowed_s: float) -> bool:
    """``decode_s`` fits ``allowed_s``, a tie included: a queue counted in samples (the scheduler)
    and one counted in frames (:func:`sizes_alone`) differ by float rounding alone."""
    return decode_s <= allowed_s + 1e-9


def _covered(cost: Cost, seconds: float, context: int) -> int:
    """Own frames of a window that decodes, with ``context`` frames around it, in ``seconds``."""
    return max(0, cost.frames_within(seconds) - context)


def _most(cost: Cost, p: Profile, *, context: int | None = None) -> int:
    """Rule 7's upper bound: the own frames of a window that decodes, with ``context`` frames
    around it (both sides' unless given), within ``longest_s`` (on a decoder so slow that this
    window is not worth its call, rule 6's floor), at most ``largest`` and at least
    ``first_frames``."""
    if cost.pace <= 0:
        return p.largest
    within = _covered(cost, p.longest_s, p.seams.middle if context is None else context)
    return max(p.first_frames, min(p.largest, max(within, _worth_a_call(cost, p))))


def _bounded(size: int, left: int, cost: Cost, p: Profile) -> int:
    """Rule 7: within [first_frames, the most], and a short rest joins this window: one shorter
    than ``first_frames``, or, where ``longest_s`` cut the window, one not worth a call of its own
    (rule 6's floor) while the whole rest is within ``largest``."""
    most = _most(cost, p)
    size = min(most, max(p.first_frames, size))
    rest = left - size
    if rest < p.first_frames or (size == most < p.largest and left <= p.largest and rest < _worth_a_call(cost, p)):
        return left
    return size
