"""Window plans and the joiner, on synthetic decoders whose output depends only on the frame.

A decoder that returns the same samples for a frame whatever window it is decoded in stands for
a perfect model: windowed decoding must then give back exactly the one-shot signal, so any error
in slicing, ordering or crossfading shows up as a difference.
"""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_server.engines.windows import (
    FLOOR_SHARE,
    FRAME_S,
    HEADROOM,
    Decoding,
    WindowPlan,
    _covered_bounds,
    plan_windows,
)

pytestmark = pytest.mark.kokoro

PER_FRAME = 600


@pytest.mark.parametrize("frames", [1, 19, 20, 39, 40, 61, 475, 510 * 50])
@pytest.mark.parametrize("plan", [WindowPlan(), WindowPlan(first=10, growth=1.5, largest=40, context=5, crossfade=5),
                                  WindowPlan(pace=0.19), WindowPlan(pace=2.0)])
def test_windows_cover_every_frame_once_in_order(frames: int, plan: WindowPlan) -> None:
    windows = plan_windows(frames, plan)
    assert windows[0].start == 0 and windows[-1].end == frames
    assert all(a.end == b.start for a, b in zip(windows, windows[1:]))
    # `first` frames first; more where a pace needs it, up to the `continued` cap
    paced_first = bool(plan.pace) and plan.first < windows[0].end <= min(plan.continued, plan.largest)
    assert windows[0].end == min(frames, plan.first) or len(windows) == 1 or paced_first
    sizes = [w.end - w.start for w in windows]
    assert all(s >= plan.first for s in sizes[:-1])
    assert max(sizes) <= max(plan.largest + plan.first, frames if len(windows) == 1 else 0)
    for w in windows:
        assert w.lo == max(0, w.start - plan.context)
        assert w.hi == (frames if w is windows[-1] else min(frames, w.end + plan.context))
        assert w.tail == (0 if w is windows[-1] else plan.crossfade)


def test_window_sizes_grow_with_the_audio_before_them() -> None:
    assert [w.end - w.start for w in plan_windows(475, WindowPlan())] == [20, 80, 375]
    assert [w.end - w.start for w in plan_windows(1500, WindowPlan())] == [20, 80, 400, 480, 480, 40]
    assert [w.end - w.start for w in plan_windows(475, WindowPlan(growth=2))] == [20, 40, 120, 295]
    sizes = [w.end - w.start for w in plan_windows(475, WindowPlan(first=20, growth=2, largest=160))]
    assert sizes == [20, 40, 120, 160, 135]
    sizes = [w.end - w.start for w in plan_windows(175, WindowPlan(first=20, growth=1, largest=160))]
    assert sizes == [20, 20, 40, 95]  # the last 15 frames join the window before them


def test_no_plan_is_one_window() -> None:
    assert [(w.start, w.end, w.lo, w.hi, w.tail) for w in plan_windows(300, None)] == [(0, 300, 0, 300, 0)]


@pytest.mark.parametrize("bad", [dict(first=0), dict(context=0), dict(crossfade=30, context=20), dict(growth=0.5),
                                 dict(first=50, largest=40), dict(continued=10), dict(pace=-0.1),
                                 dict(carry=-1), dict(continued_alone=100)])
def test_bad_plans_name_the_field(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad)) if "crossfade" not in bad else "crossfade"):
        WindowPlan(**bad)


def _frame_exact_decoder(signal: np.ndarray, calls: list[tuple[int, int]]):
    def decode(lo: int, hi: int, halt: object = None) -> np.ndarray:
        calls.append((lo, hi))
        return signal[lo * PER_FRAME:hi * PER_FRAME].copy()
    return decode


@pytest.mark.parametrize("frames", [5, 20, 61, 475])
def test_windows_of_a_frame_exact_decoder_join_to_the_one_shot_signal(frames: int) -> None:
    rng = np.random.default_rng(frames)
    signal = rng.standard_normal(frames * PER_FRAME).astype(np.float32)
    calls: list[tuple[int, int]] = []
    decoding = Decoding(frames=frames, decode=_frame_exact_decoder(signal, calls), plan=WindowPlan())
    parts = []
    while not decoding.done:
        parts.append(decoding.step())
    joined = np.concatenate(parts)
    np.testing.assert_allclose(joined, signal, atol=1e-6)  # crossfades of equal audio are that audio
    assert calls == [(w.lo, w.hi) for w in decoding.windows]  # each window decoded once, in order
    assert parts[0].size == min(frames, 20) * PER_FRAME or len(parts) == 1
    with pytest.raises(RuntimeError):
        decoding.step()


def test_a_seam_between_different_renders_is_a_smooth_blend() -> None:
    """Two windows that disagree (a constant 0 then 1) meet through a monotonic ramp, no step."""
    frames, plan = 60, WindowPlan(first=20, growth=1, largest=20, context=8, crossfade=8)
    decoding = Decoding(frames=frames, plan=plan,
                        decode=lambda lo, hi, halt=None: np.full((hi - lo) * PER_FRAME, float(lo > 0), np.float32))
    audio = decoding.rest()
    assert audio.size == frames * PER_FRAME
    seam = audio[20 * PER_FRAME:28 * PER_FRAME]
    assert seam[0] < 0.01 and seam[-1] > 0.99 and np.all(np.diff(seam) >= 0)
    assert np.abs(np.diff(audio)).max() < 2.0 / (8 * PER_FRAME) * 1.6  # the steepest step of the raised cosine


@pytest.mark.parametrize(("frames", "before", "sizes"), [
    (475, 0, [20, 80, 375]),
    (99, 40, [99]),          # after 1 s of audio, a 2.5 s sentence is one window: the one-shot render
    (160, 40, [160]),
    (475, 99, [160, 315]),   # a chunk's first window stays within `continued`, later ones grow on
    (1500, 200, [160, 480, 480, 380]),  # never more than `largest` at once
    (99, 5, [20, 79]),       # at least `first` frames
])
def test_windows_grow_with_the_audio_the_speech_made_before_them(frames: int, before: int, sizes: list[int]) -> None:
    windows = plan_windows(frames, WindowPlan(), before=before)
    assert [w.end - w.start for w in windows] == sizes
    assert windows[0].lo == 0 and windows[-1].hi == frames


@pytest.mark.parametrize(("pace", "frames", "sizes"), [
    (0.0, 475, [20, 80, 375]),          # no pace: growth alone
    (0.01, 475, [20, 455]),             # a GPU's pace: the first window's audio covers all the rest
    (0.152, 475, [26, 79, 370]),        # this CPU's: 6 frames more first save a window (FIRST_TRADE)
    (0.19, 475, [36, 92, 347]),         # 20 frames would not cover 40 and their context: a larger first
    (0.25, 208, [61, 147]),             # a slow host: first audio later, and no silence after it
    (0.4, 1500, [160, 320, 480, 480, 60]),  # no first window keeps up: the largest allowed (continued),
                                            # then never below doubling: smaller ones fall further behind
    (0.1, 99, [20, 79]),                # a last window without right context fits as it is
])
def test_windows_keep_up_with_the_decoders_pace(pace: float, frames: int, sizes: list[int]) -> None:
    assert [w.end - w.start for w in plan_windows(frames, WindowPlan(pace=pace))] == sizes


def test_a_last_window_the_listener_could_not_cover_joined_is_left_on_its_own() -> None:
    """After 40 frames of earlier audio, 10 of them still to hear (too few to cover any window: the
    growth floor's plan), at pace 0.209, joining the last 20 frames to the window before them would
    outrun the listener: they are a window of their own."""
    sizes = [w.end - w.start for w in plan_windows(340, WindowPlan(pace=0.209), before=40, queued=10)]
    assert sizes == [80, 240, 20]


def _sizes(windows: list) -> list[int]:
    return [w.end - w.start for w in windows]


def test_a_sentence_after_earlier_audio_plans_from_what_its_listener_still_has_to_hear() -> None:
    """The CPU demo's stutter: a 5 s sentence carried after 2.3 s of queued audio (92 frames), at
    the int8 model's pace with two busy cores beside it (0.66). Planned as if it followed only the
    60 frames it carries (all of them unheard), the growth floor made its first window 120 frames,
    3.0 s to decode at that pace; from the real queue, the first window takes 80 % of it."""
    plan = WindowPlan(pace=0.66)
    assert _sizes(plan_windows(200, plan, before=60)) == [120, 80]
    windows = plan_windows(200, plan, before=60, queued=92)
    assert _sizes(windows) == [91, 109]
    assert plan.decode_s(windows[0].hi - windows[0].lo) <= FLOOR_SHARE * 92 * FRAME_S
    alone = WindowPlan(pace=0.39, continued=480)  # a faster decoder, far enough ahead: the one-shot render
    assert _sizes(plan_windows(200, alone, before=60, queued=101)) == [200]


@pytest.mark.parametrize(("pace", "queued", "sizes"), [
    (0.66, 30, [120, 80]),   # 0.75 s queued covers no window: the listener runs dry whatever the size
    (0.63, 60, [120, 80]),   # covered windows would be five (56, 46, 36, 21, 41): the floor's two
])
def test_where_the_queue_cannot_carry_the_sentence_the_growth_floor_plans_it(
    pace: float, queued: float, sizes: list[int],
) -> None:
    assert _sizes(plan_windows(200, WindowPlan(pace=pace), before=60, queued=queued)) == sizes


@pytest.mark.parametrize("pace", [0.05, 0.2, 0.4, 0.58, 0.66, 0.7])
@pytest.mark.parametrize("queued", [60, 80, 92, 120, 200])
@pytest.mark.parametrize(("frames", "before"), [(200, 60), (475, 153), (99, 60)])
def test_windows_after_earlier_audio_never_outlast_the_listeners_queue_when_any_plan_could_not(
    pace: float, queued: float, frames: int, before: int,
) -> None:
    """Simulated at the plan's pace from ``queued`` frames: where windows each within FLOOR_SHARE
    of the queue at their start exist, no more of them than the plan has, no window of the plan
    outlasts the queue (on the old plans, 120 frames after 92 queued at pace 0.7 did)."""
    plan = WindowPlan(pace=pace)
    windows = plan_windows(frames, plan, before=before, queued=queued)
    left, worst = float(queued), 0.0
    for w in windows:
        decode = plan.decode_s(w.hi - w.lo) / FRAME_S
        worst = max(worst, decode - left)
        left = max(0.0, left - decode) + (w.end - w.start)
    covered = _covered_bounds(frames, plan, queued=queued)
    if covered is not None and len(covered) - 1 <= len(windows):  # as few windows, each covered
        assert worst <= 0, (_sizes(windows), covered)


@pytest.mark.parametrize(("overhead", "sizes"), [
    (0.0, [20, 90, 365]),  # the tiny CPU model's warm-up pace alone: three windows
    (0.1, [38, 437]),      # its fitted cost, 0.1 s a call and 0.048 per frame: 18 frames more first (22 ms
                           # before first audio), one window less (0.1 s and 40 frames of context)
])
def test_a_fixed_cost_per_call_makes_larger_windows_cheaper(overhead: float, sizes: list[int]) -> None:
    pace = 0.107 if not overhead else 0.048
    assert [w.end - w.start for w in plan_windows(475, WindowPlan(pace=pace, overhead=overhead))] == sizes


@pytest.mark.parametrize("overhead", [0.0, 0.03, 0.1])
@pytest.mark.parametrize("pace", [0.05, 0.1, 0.12, 0.152, 0.19, 0.25, 0.3])
@pytest.mark.parametrize("frames", [61, 99, 160, 300, 475, 510 * 3])
def test_a_decoder_at_the_plans_pace_keeps_ahead_of_the_listener(pace: float, frames: int, overhead: float) -> None:
    """Windows decoded back to back at ``pace`` (frames of playing time per decoded frame) and
    ``overhead`` seconds a call, played from the first window's arrival: each window's decoding
    takes at most HEADROOM of the audio still queued when it starts (the arithmetic the plan
    promises; the server's own timing is bench/design.py's)."""
    windows = plan_windows(frames, WindowPlan(pace=pace, overhead=overhead))
    clock, made, played_from = 0.0, 0, None
    for w in windows:
        decode = (w.hi - w.lo) * pace + overhead / 0.025
        if played_from is not None:
            queued = made - (clock - played_from)
            assert decode <= HEADROOM * queued + 1e-9, ([(x.start, x.end) for x in windows], w)
        clock += decode
        played_from = clock if played_from is None else played_from
        made += w.end - w.start


def test_follow_replans_before_the_first_step_only() -> None:
    signal = np.linspace(-1, 1, 475 * PER_FRAME, dtype=np.float32)
    calls: list[tuple[int, int]] = []
    decoding = Decoding(frames=475, decode=_frame_exact_decoder(signal, calls), plan=WindowPlan())
    decoding.follow(200)
    parts = [decoding.step() for _ in range(decoding.remaining)]
    np.testing.assert_allclose(np.concatenate(parts), signal, atol=1e-3)
    assert calls == [(0, 180), (140, 475)] and decoding.done
    with pytest.raises(RuntimeError, match="already decoded"):
        decoding.follow(0)
    with pytest.raises(ValueError, match="before"):
        plan_windows(10, WindowPlan(), before=-1)


def test_the_default_plan_is_the_one_the_window_bench_measured_first() -> None:
    """README and docs quote bench/results/windowing.json's first plan as the default's quality."""
    import json
    from pathlib import Path

    from bench.windowing import PLANS

    default = WindowPlan()
    fields = (default.first, default.growth, default.largest, default.context, default.crossfade)
    assert PLANS[0] == fields
    recorded = json.loads((Path(__file__).resolve().parents[2] / "bench/results/windowing.json").read_text())
    assert tuple(recorded["default"][k] for k in ("first", "growth", "largest", "context", "crossfade")) == fields
    assert all((p["first"], p["growth"], p["largest"], p["context"], p["crossfade"]) == fields
               for p in (e["plans"][0] for e in recorded["sentences"].values()))


ANSWER_FRAMES = (153, 200, 138)
"""The CPU demo's answer ("Good question, and the offline model has a ready answer. Streaming
speech means ..."), one utterance per sentence, in frames of the af_heart voice (int8 weights)."""


def _late_s(answer: tuple[int, ...], *, real: float, planned: float, from_queue: bool) -> float:
    """Seconds a listener waits after first audio when each sentence is its own utterance (carried
    while 1.5 s or more is queued), planned at pace ``planned`` and decoded back to back at ``real``,
    the text all there (an LLM writes faster than this decoder speaks)."""
    plan = WindowPlan(pace=planned, continued=WindowPlan().continued_alone)  # alone on the engine
    clock, runs_out, late = 0.0, None, 0.0
    for frames in answer:
        queued = 0.0 if runs_out is None else max(0.0, runs_out - clock)
        before = plan.carry if queued >= plan.carry else 0
        for w in plan_windows(frames, plan, before=before, queued=queued if from_queue and before else None):
            clock += (w.hi - w.lo) * real
            if runs_out is None:
                runs_out = clock + 0.08 / FRAME_S  # the page starts the first chunk 80 ms on (LEAD_S)
            elif clock > runs_out:
                late, runs_out = late + clock - runs_out, clock
            runs_out += w.end - w.start
    return late * FRAME_S


@pytest.mark.parametrize("real", [0.45, 0.5, 0.55, 0.6, 0.63, 0.66, 0.7, 0.75])
@pytest.mark.parametrize("error", [0.8, 0.9, 1.0])
def test_a_demo_answer_plays_without_a_gap_while_the_pace_errs_within_floor_share(real: float, error: float) -> None:
    """A CPU decoding at up to 0.75 s per audio second, the pace it was measured at up to 1/0.8
    slower than it decodes (FLOOR_SHARE's margin): the answer plays through."""
    assert _late_s(ANSWER_FRAMES, real=real, planned=real * error, from_queue=True) == 0


def test_planned_as_if_the_carried_audio_were_unheard_the_demo_answer_had_gaps() -> None:
    """The same grid, each carried utterance planned from its 60 carried frames alone: a gap at
    0.70 and 0.75 (0.05 to 0.46 s), as the demo page counted on 2 busy cores."""
    gaps = {(real, error): _late_s(ANSWER_FRAMES, real=real, planned=real * error, from_queue=False)
            for real in (0.66, 0.7, 0.75) for error in (0.8, 0.9, 1.0)}
    assert gaps[(0.66, 1.0)] == 0 and gaps[(0.7, 1.0)] > 0 and gaps[(0.75, 0.8)] > 0.4
