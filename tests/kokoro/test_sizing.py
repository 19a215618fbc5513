"""The job sizer as a table: situations on three decoders and the sizes they get (kokoro_server/sizing.py).

Costs, as measured: the int8 onnx model on 2 busy CPU cores (pace 0.6, no fixed cost per call; 0.42
on a quiet host), the tiny torch model there (0.05 and 40 ms a call), and a GPU-like decoder (0.015
and 15 ms a call: an assumption, no GPU measured yet). Each row says which rule of the module's
docstring decides it.
"""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_server.engines.windows import Decoding
from kokoro_server.sizing import (
    PROFILES,
    Cost,
    Profile,
    Situation,
    Sizer,
    job_frames,
    next_window,
    profile_for,
    sizes_alone,
)

pytestmark = pytest.mark.kokoro

CPU, GPU = PROFILES["cpu"], PROFILES["gpu"]
ONNX, TINY, FAST = Cost(pace=0.6), Cost(pace=0.05, overhead=0.04), Cost(pace=0.015, overhead=0.015)

# (why, situation, profile, next window's own frames, frames a joined job may hold)
TABLE = [
    ("1: a free decoder decodes the chunk whole", Situation(left=400, queued_s=0, cost=Cost()), CPU, 400, 0),
    ("1+7: up to largest (30 s of audio)", Situation(left=2000, queued_s=0, cost=Cost()), CPU, 1200, 0),
    ("2: a 6-word sentence the tiny model decodes in 0.14 s is one window",
     Situation(left=80, queued_s=0, cost=TINY), CPU, 80, 0),
    ("4: a 35-word sentence on the tiny model: 29 frames first, the rest then covered",
     Situation(left=400, queued_s=0, cost=TINY), CPU, 29, 0),
    ("4: on onnx the same sentence: 83 frames first (1.5 s of waiting) save more decoding than they cost",
     Situation(left=400, queued_s=0, cost=ONNX), CPU, 83, 0),
    ("4: a 6-word sentence on onnx: splitting saves no wait worth its context (a first window's 34): one window",
     Situation(left=80, queued_s=0, cost=ONNX), CPU, 80, 0),
    ("5: 1.3 s queued covers 0.91 s of decoding: 60 frames, 20 of them context",
     Situation(left=348, queued_s=1.3, cost=ONNX, started=True), CPU, 40, 60),
    ("5: 4 s queued: 2.8 s of decoding, 186 frames, 166 besides context (a joined job: 7's 180)",
     Situation(left=300, queued_s=4.0, cost=ONNX, started=True), CPU, 166, 180),
    ("3: the rest decodes within the queue: one window, no context twice",
     Situation(left=100, queued_s=4.0, cost=ONNX, started=True), CPU, 100, 180),
    ("5+7: a queue that covers no useful window: the decoder is behind, the most 7 allows",
     Situation(left=600, queued_s=0.3, cost=ONNX, started=True), CPU, 180, 14),
    ("3: a sentence spoken while 5 s of audio plays is one window (exactly one shot)",
     Situation(left=200, queued_s=5.0, cost=TINY), CPU, 200, 1200),
    ("5+7: 5 s queued covers 213 frames, but 2 s of decoding holds 133, under the floor of 6: 180",
     Situation(left=400, queued_s=5.0, cost=ONNX, started=True), CPU, 180, 180),
    ("3+7: a 230-frame sentence: the 50 frames the bound (180) would leave are not worth a call: one window",
     Situation(left=230, queued_s=5.0, cost=ONNX), CPU, 230, 180),
    ("6: another listener with 1 s queued: a window decodes in 0.7 of it, 528 frames, 20 of them context",
     Situation(left=1000, queued_s=30.0, cost=TINY, started=True, others_s=1.0), CPU, 508, 528),
    ("6: one with nothing queued: no window under 180 frames besides context (1/10 of it unheard), this one's "
     "neither (rule 5 alone: 166)",
     Situation(left=300, queued_s=4.0, cost=ONNX, started=True, others_s=0.0), CPU, 180, 180),
    ("6: 1 s queued, the other 2 s (0.7 of it within the floor): not rule 4's 44 frames, mostly context, but 180",
     Situation(left=400, queued_s=1.0, cost=Cost(pace=0.35), others_s=2.0), CPU, 180, 80),
    ("6: the same with 5 s queued for the other, who can spare the context: rule 4's 44 frames",
     Situation(left=400, queued_s=1.0, cost=Cost(pace=0.35), others_s=5.0), CPU, 44, 80),
    ("6: a listener whose audio ran dry while another has work: its next sentence whole, not rule 4's 32 frames",
     Situation(left=179, queued_s=0, cost=Cost(pace=0.35), ran_dry=True, others_s=0.0), CPU, 179, 0),
    ("4: a newcomer while another has work: its first window is still rule 4's trade",
     Situation(left=179, queued_s=0, cost=Cost(pace=0.35), others_s=0.0), CPU, 32, 0),
    ("4: a listener run dry with the decoder to itself: rule 4's trade",
     Situation(left=179, queued_s=0, cost=Cost(pace=0.35), ran_dry=True), CPU, 32, 0),
    ("6: the floor counts the call's fixed cost too: 9x (20 context + 32 frames' worth of 0.04 s)",
     Situation(left=1000, queued_s=30.0, cost=TINY, started=True, others_s=0.0), CPU, 468, 488),
    ("6: another listener with 10 s queued holds nothing back",
     Situation(left=300, queued_s=10.0, cost=TINY, started=True, others_s=10.0), CPU, 300, 1200),
    ("2: on a GPU a 10 s sentence is one window", Situation(left=400, queued_s=0, cost=FAST), GPU, 400, 0),
    ("4: on a GPU a 20 s chunk still starts small", Situation(left=800, queued_s=0, cost=FAST), GPU, 20, 0),
    ("3: then its 0.5 s covers the rest",
     Situation(left=780, queued_s=0.5, cost=FAST, started=True), GPU, 780, 893),
    ("6: on a GPU the floor is 9x (20 + 40 frames' worth), 540: a rest of 400 frames is one window, and a "
     "newcomer waits 0.17 s", Situation(left=400, queued_s=3.0, cost=FAST, started=True, others_s=0.0),
     GPU, 400, 560),
    ("7: never more than largest", Situation(left=2000, queued_s=60.0, cost=FAST, started=True), GPU, 1200, 1200),
    ("3+7: the tiny model decodes 1528 frames in 2 s: a 35-word sentence's rest is one window",
     Situation(left=645, queued_s=1.25, cost=TINY, started=True), CPU, 645, 668),
    ("7: onnx on a quiet host (pace 0.35) decodes 228 frames in 2 s: 208 with context both sides",
     Situation(left=2000, queued_s=60.0, cost=Cost(pace=0.35), started=True), CPU, 208, 228),
    ("7: at pace 0.6 2 s is 133 frames, less than the floor of 6: 180",
     Situation(left=2000, queued_s=60.0, cost=ONNX, started=True), CPU, 180, 180),
]


@pytest.mark.parametrize(("why", "situation", "profile", "window", "joined"), TABLE, ids=[row[0] for row in TABLE])
def test_each_situation_gets_its_size(why: str, situation: Situation, profile: Profile, window: int,
                                      joined: int) -> None:
    assert next_window(situation, profile) == window
    assert job_frames(situation, profile) == joined


@pytest.mark.parametrize("left", [1, 7, 19, 20, 21, 39, 40, 41, 80, 333, 479, 480, 481, 2000])
@pytest.mark.parametrize("cost", [Cost(), ONNX, TINY, FAST], ids=["free", "onnx", "tiny", "fast"])
def test_a_chunks_windows_cover_it_once_and_none_is_a_sliver(left: int, cost: Cost) -> None:
    """Asked window after window (the listener's queue as a decoder at this cost would leave it),
    the sizes add up to the chunk and each is first_frames or more, unless the chunk is smaller."""
    sizes = sizes_alone(left, Sizer(CPU), cost)
    assert sum(sizes) == left
    assert all(1 <= size <= CPU.largest + CPU.first_frames - 1 for size in sizes)  # a short rest may join
    assert all(size >= CPU.first_frames for size in sizes) or len(sizes) == 1


@pytest.mark.parametrize(("cost", "frames", "sizes"), [
    (Cost(pace=0.42), 192, [42, 50, 100]),  # onnx on a quiet host: each window what the queue before it covers
    (Cost(pace=0.42), 400, [47, 58, 100, 195]),  # 2 s holds 170 besides context: the floor, 180; 15 left join
    (TINY, 400, [29, 371]),
    (TINY, 688, [49, 639]),  # a 35-word sentence: 20x faster, a window may hold 1200 frames
    (FAST, 1000, [22, 978]),  # a 25 s chunk on a GPU: a first window, then the rest
])
def test_alone_a_chunk_starts_small_and_then_grows(cost: Cost, frames: int, sizes: list[int]) -> None:
    assert sizes_alone(frames, Sizer(profile_for("cuda" if cost is FAST else "cpu")), cost) == sizes


def test_every_profile_prices_the_seams_a_decoding_renders() -> None:
    """A window priced with less context than it renders would hold the decoder longer than its
    listener's queue covers (windows.Seams is the one place both read; the engines decode with
    its defaults)."""
    rendered = Decoding(frames=100, decode=lambda lo, hi, halt=None, **_: np.zeros((hi - lo) * 600, np.float32))
    assert all(profile.seams == rendered.seams for profile in PROFILES.values())
    rendered.step(30)
    rendered.step(30)
    first, middle = rendered.windows
    assert first.hi - first.end == rendered.seams.after(False)
    assert (middle.start - middle.lo) + (middle.hi - middle.end) == rendered.seams.middle


def test_the_device_picks_the_profile() -> None:
    assert profile_for("cuda") is GPU and profile_for("cuda:1") is GPU and profile_for("cpu") is CPU


@pytest.mark.parametrize("bad", [dict(first_frames=0), dict(largest=10), dict(headroom=0), dict(headroom=1.5),
                                 dict(first_audio_s=-1), dict(longest_s=0), dict(contention_waste=0),
                                 dict(contention_waste=1)])
def test_a_bad_option_is_refused_naming_it(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        Profile(**bad)  # type: ignore[arg-type]


ANSWER_FRAMES = (153, 200, 138)
"""The CPU demo's answer ("Good question, and the offline model has a ready answer. Streaming
speech means ..."), one utterance per sentence, in frames of the af_heart voice (int8 weights)."""


def _late_s(answer: tuple[int, ...], *, real: float, planned: float) -> float:
    """Seconds a listener waits after its first audio when each sentence is its own utterance, the
    windows sized at pace ``planned`` from the listener's real queue and decoded back to back at
    ``real``, the text all there (an LLM writes faster than this decoder speaks)."""
    sizer, cost, frame = Sizer(CPU), Cost(pace=planned), 0.025
    clock, runs_out, late = 0.0, None, 0.0
    for frames in answer:
        done = 0
        while done < frames:
            queued = 0.0 if runs_out is None else max(0.0, runs_out - clock)
            size = sizer.next_window(Situation(left=frames - done, queued_s=queued, cost=cost, started=bool(done)))
            end = min(frames, done + size)
            decoded = CPU.seams.rendered(end - done, started=bool(done), last=end >= frames)
            clock += decoded * frame * real
            if runs_out is None:
                runs_out = clock + 0.08  # the page starts the first chunk 80 ms on (LEAD_S)
            elif clock > runs_out:
                late, runs_out = late + clock - runs_out, clock
            runs_out += (end - done) * frame
            done = end
    return late


@pytest.mark.parametrize("real", [0.3, 0.45, 0.5, 0.55, 0.6, 0.63, 0.66])
@pytest.mark.parametrize("error", [0.8, 0.9, 1.0])
def test_a_demo_answer_plays_without_a_gap_while_the_pace_errs_within_headroom(real: float, error: float) -> None:
    """A CPU decoding at up to 0.66 s per audio second, its pace measured up to 1/0.8 faster than it
    decodes: the answer plays through (its sentences are carried on the audio before them)."""
    assert _late_s(ANSWER_FRAMES, real=real, planned=real * error) == 0
