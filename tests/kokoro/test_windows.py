"""Windowed decoding's mechanics (engines/windows.py), on synthetic decoders whose output depends only
on the frame.

A decoder that returns the same samples for a frame whatever window it is decoded in stands for
a perfect model: windowed decoding must then give back exactly the one-shot signal, so any error
in slicing, ordering or crossfading shows up as a difference. How large each window is, is the job
sizer's (test_sizing.py); here the sizes are given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kokoro_server.engines.windows import (
    CONTEXT,
    CROSSFADE,
    FEATURE_CONTEXT,
    OPENING_CONTEXT,
    Decoding,
    Seams,
    feature_span,
)

pytestmark = pytest.mark.kokoro

PER_FRAME = 600
SIZES = [[20, 80, 375], [475], [1, 474], [20, 20, 20, 415], [474, 1], [100, 375]]


def _frame_exact_decoder(signal: np.ndarray, calls: list[tuple[int, int]]) -> Callable[..., np.ndarray]:
    def decode(lo: int, hi: int, halt: object = None) -> np.ndarray:
        calls.append((lo, hi))
        return signal[lo * PER_FRAME:hi * PER_FRAME].copy()
    return decode


@pytest.mark.parametrize("sizes", SIZES, ids=[str(s) for s in SIZES])
def test_windows_cover_every_frame_once_in_order_with_context_and_crossfade(sizes: list[int]) -> None:
    frames = 475
    signal = np.random.default_rng(1).standard_normal(frames * PER_FRAME).astype(np.float32)
    calls: list[tuple[int, int]] = []
    decoding = Decoding(frames=frames, decode=_frame_exact_decoder(signal, calls))
    for size in sizes:
        if not decoding.done:
            decoding.step(size)
    windows = decoding.windows
    assert decoding.done and windows[0].start == 0 and windows[-1].end == frames
    assert all(a.end == b.start for a, b in zip(windows, windows[1:]))
    for w in windows:
        assert w.lo == max(0, w.start - CONTEXT)
        assert w.tail == (0 if w is windows[-1] else min(CROSSFADE, frames - w.end))
        after = OPENING_CONTEXT if w.start == 0 else CONTEXT
        assert w.hi == (frames if w is windows[-1] else min(frames, w.end + w.tail + after))
    assert calls == [(w.lo, w.hi) for w in windows]  # each window decoded once, in order


@pytest.mark.parametrize(("frames", "sizes"), [(5, [20]), (20, [20]), (61, [20, 41]), (475, [20, 80, 375]),
                                               (475, [30, 30, 30, 385])])
def test_windows_of_a_frame_exact_decoder_join_to_the_one_shot_signal(frames: int, sizes: list[int]) -> None:
    rng = np.random.default_rng(frames)
    signal = rng.standard_normal(frames * PER_FRAME).astype(np.float32)
    decoding = Decoding(frames=frames, decode=_frame_exact_decoder(signal, []))
    parts = [decoding.step(size) for size in sizes]
    np.testing.assert_allclose(np.concatenate(parts), signal, atol=1e-6)  # crossfades of equal audio are that audio
    assert parts[0].size == min(frames, sizes[0]) * PER_FRAME or len(parts) == 1
    with pytest.raises(RuntimeError):
        decoding.step(20)


def test_a_seam_between_different_renders_is_a_smooth_blend() -> None:
    """Two windows that disagree (a constant 0 then 1) meet through a monotonic ramp, no step."""
    frames = 60
    decoding = Decoding(frames=frames, seams=Seams(context=8, crossfade=8),
                        decode=lambda lo, hi, halt=None, **_: np.full((hi - lo) * PER_FRAME, float(lo > 0), np.float32))
    audio = np.concatenate([decoding.step(20), decoding.step(20), decoding.step(20)])
    assert audio.size == frames * PER_FRAME
    seam = audio[20 * PER_FRAME:28 * PER_FRAME]
    assert seam[0] < 0.01 and seam[-1] > 0.99 and np.all(np.diff(seam) >= 0)
    assert np.abs(np.diff(audio)).max() < 2.0 / (8 * PER_FRAME) * 1.6  # the steepest step of the raised cosine


def test_rest_is_one_window_and_bad_shapes_are_refused() -> None:
    signal = np.linspace(-1, 1, 100 * PER_FRAME, dtype=np.float32)
    calls: list[tuple[int, int]] = []
    decoding = Decoding(frames=100, decode=_frame_exact_decoder(signal, calls))
    parts = [decoding.step(30), decoding.rest()]
    np.testing.assert_allclose(np.concatenate(parts), signal, atol=1e-3)
    assert calls == [(0, 30 + CROSSFADE + OPENING_CONTEXT), (30 - CONTEXT, 100)]
    assert decoding.done and decoding.rest().size == 0
    assert Seams().window(0, 500, 100) == Seams().window(0, 100, 100)  # a window never passes the chunk's end
    with pytest.raises(ValueError, match="own"):
        Decoding(frames=10, decode=_frame_exact_decoder(signal, [])).step(0)
    with pytest.raises(ValueError, match="crossfade"):
        Seams(context=4, crossfade=-1)
    with pytest.raises(ValueError, match="frames"):
        Decoding(frames=0, decode=_frame_exact_decoder(signal, []))


def test_the_features_around_a_render_reach_past_its_context_within_the_chunk() -> None:
    """The decoder's body sees FEATURE_CONTEXT frames around what is rendered, clipped at the ends."""
    assert FEATURE_CONTEXT > CONTEXT + CROSSFADE  # the body reaches further than the vocoder
    assert feature_span(0, 30, 100) == (0, 30 + FEATURE_CONTEXT)
    assert feature_span(40, 60, 100) == (40 - FEATURE_CONTEXT, 60 + FEATURE_CONTEXT)
    assert feature_span(90, 100, 100) == (90 - FEATURE_CONTEXT, 100)
    assert feature_span(0, 100, 100) == (0, 100)  # one shot: the whole chunk, nothing more


def test_context_and_crossfade_are_the_ones_the_window_bench_measured_first() -> None:
    """README and docs quote bench/results/windowing.json's first plan as the windows' quality."""
    from bench.windowing import PLANS

    assert PLANS[0][3:] == (CONTEXT, CROSSFADE)
    recorded = json.loads((Path(__file__).resolve().parents[2] / "bench/results/windowing.json").read_text())
    assert (recorded["default"]["context"], recorded["default"]["crossfade"]) == (CONTEXT, CROSSFADE)
