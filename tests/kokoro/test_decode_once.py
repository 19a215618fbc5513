"""Decoding as little twice as the listener allows (docs/throughput.md): the windows left join into
one when the listener is far enough ahead, and the pace windows are cut by is re-measured.

A frame-exact decoder (its samples for a frame do not depend on the window) stands for a perfect
model, so a joined window must give back exactly the one-shot signal.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hand_clock import HandClock

from kokoro_server.engines.halt import Halt
from kokoro_server.engines.windows import Decode, Decoding, WindowPlan, plan_windows
from kokoro_server.pace import PACE_INTERVAL_S, DecoderCost, PaceMeter
from kokoro_server.scheduler import Scheduler
from kokoro_server.synth import Synthesizer

pytestmark = pytest.mark.kokoro

PER_FRAME = 600


def _decoder(signal: np.ndarray, calls: list[tuple[int, int]]) -> Decode:
    def decode(lo: int, hi: int, halt: Halt | None = None) -> np.ndarray:
        calls.append((lo, hi))
        return signal[lo * PER_FRAME:hi * PER_FRAME].copy()
    return decode


def _decoding(frames: int, plan: WindowPlan, calls: list[tuple[int, int]]) -> tuple[Decoding, np.ndarray]:
    signal = np.random.default_rng(frames).standard_normal(frames * PER_FRAME).astype(np.float32)
    return Decoding(frames=frames, decode=_decoder(signal, calls), plan=plan), signal


def test_the_windows_left_join_into_one_that_decodes_no_context_twice() -> None:
    calls: list[tuple[int, int]] = []
    decoding, signal = _decoding(475, WindowPlan(), calls)
    planned = list(decoding.windows)
    assert len(planned) >= 3
    first = decoding.step()
    assert decoding.rest_frames == 475 - planned[1].lo
    assert decoding.join_rest()
    assert decoding.remaining == 1 and not decoding.join_rest()  # one window left: nothing to join
    rest = decoding.step()
    assert decoding.done
    np.testing.assert_allclose(np.concatenate([first, rest]), signal, atol=1e-6)
    assert calls == [(planned[0].lo, planned[0].hi), (planned[1].lo, 475)]


class _Engine:
    """A frame-exact engine: every chunk is ``frames`` frames of noise."""

    name, device, windowed = "exact", "cpu", True

    def __init__(self, frames: int) -> None:
        self.frames = frames

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, plan: WindowPlan | None,
              halt: Halt | None = None) -> Decoding:
        return _decoding(self.frames, plan or WindowPlan(), [])[0]


def _ahead(pace: float, queued_s: float, *, frames: int = 300) -> bool:
    """Whether a chunk of ``frames`` joins its rest after its first window, with ``queued_s`` of
    the owner's audio queued (the clock stands still)."""

    async def scenario() -> bool:
        scheduler = Scheduler(clock=HandClock())
        await scheduler.start()
        synth = Synthesizer(engine=_Engine(frames), voices={"v": np.zeros((510, 1, 256), np.float32)},
                            scheduler=scheduler)
        synth.keep_up(DecoderCost(pace=pace))
        try:
            await scheduler.submit("o", lambda: queued_s, audio_s=float)
            decoding = _Engine(frames).begin("", np.zeros(256), 1.0, plan=synth.plan)
            decoding.step()
            return synth.ahead("o", decoding)
        finally:
            await scheduler.stop()
            synth.close()

    return asyncio.run(scenario())


def test_a_listener_far_enough_ahead_gets_the_rest_in_one_window() -> None:
    # 300 frames, the first window 29: the rest (271 + 20 of context, 7.3 s) at pace 0.2 takes 1.46 s
    assert _ahead(0.2, 3.0)  # 0.7 x 3 s covers 1.46 s
    assert not _ahead(0.2, 2.0)  # 0.7 x 2 s does not
    assert not _ahead(0.0, 60.0)  # without a pace the text alone decides the windows
    assert not _ahead(0.2, 60.0, frames=600)  # past ``largest`` a joined window would hold the engine too long


def test_pace_is_the_median_of_recent_figures_and_remeasured_only_when_due() -> None:
    clock = HandClock()
    meter = PaceMeter(remeasure=True, clock=clock)
    assert meter.add(DecoderCost(pace=0.4)).pace == 0.4  # a busy warm-up
    assert not meter.due()
    clock.now += PACE_INTERVAL_S
    assert meter.due()
    meter.add(DecoderCost(pace=0.2))
    assert meter.add(DecoderCost(pace=0.21)).pace == 0.21  # two quiet idle figures outvote it
    assert not meter.due()
    pinned = PaceMeter(remeasure=False, clock=clock)
    clock.now += 10 * PACE_INTERVAL_S
    assert not pinned.due()  # KOKORO_DECODER_PACE set: never re-measured


def test_a_first_window_that_is_nearly_the_whole_chunk_is_the_whole_chunk() -> None:
    """A short sentence at a slow pace: 92 of 136 frames and 20 of context first would bring its
    first audio barely sooner and decode context twice; one shot is as early and cheaper."""
    assert [(w.lo, w.hi) for w in plan_windows(136, WindowPlan(pace=1.0))] == [(0, 136)]
    assert len(plan_windows(136, WindowPlan(pace=0.2))) > 1  # a fast pace still starts small
