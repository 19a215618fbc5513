"""The decoder cost windows are sized by: a cost fitted to windows of two sizes decoded at warm-up,
then to the windows the server decodes (kokoro_server/pace.py), which the Synthesizer's sizer
reads."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from hand_clock import HandClock

from kokoro_server.engines.windows import FRAME_S, Decoding
from kokoro_server.pace import FIT_LEAST, PACE_INTERVAL_S, PaceMeter, fit_cost, pace_of
from kokoro_server.scheduler import Scheduler
from kokoro_server.sizing import Cost
from kokoro_server.synth import Synthesizer

pytestmark = pytest.mark.kokoro


def _affine(overhead: float, pace: float, sizes: list[int]) -> list[tuple[int, float]]:
    return [(n, overhead + n * FRAME_S * pace) for n in sizes]


def test_a_fixed_cost_per_call_and_a_pace_per_frame_are_recovered_from_windows() -> None:
    # the tiny CPU model measured alone: ~65 ms a call and 1.3 ms a frame (pace 0.052)
    fitted = fit_cost(_affine(0.065, 0.052, [40, 120, 240, 60, 160, 480, 356, 364]))
    assert fitted is not None
    assert fitted.overhead == pytest.approx(0.065) and fitted.pace == pytest.approx(0.052)


@pytest.mark.parametrize(("windows", "why"), [
    (_affine(0.065, 0.052, [40, 120, 240]), "fewer than FIT_LEAST windows"),
    (_affine(0.065, 0.052, [200, 210, 220, 230, 240, 250, 260, 270]), "sizes too alike for a fixed cost"),
    ([(n, 0.5 - n * 0.001) for n in [40, 80, 120, 160, 200, 240, 280, 320]], "larger windows faster: not a cost"),
])
def test_no_cost_is_fitted_where_the_windows_cannot_tell_one(windows: list[tuple[int, float]], why: str) -> None:
    assert fit_cost(windows) is None, why


def test_a_line_below_the_origin_is_read_as_a_pace_alone() -> None:
    fitted = fit_cost(_affine(-0.01, 0.2, [40, 80, 120, 160, 200, 240, 280, 320]))
    assert fitted is not None and fitted.overhead == 0.0 and 0.1 < fitted.pace < 0.2


def test_the_meter_answers_the_warm_up_pace_until_windows_were_fitted_and_a_pinned_one_never_fits() -> None:
    clock = HandClock()
    meter = PaceMeter(remeasure=True, clock=clock)
    assert meter.add(Cost(pace=0.136)) == Cost(pace=0.136)
    windows = _affine(0.1, 0.048, [40, 120, 240, 60, 160, 480, 356, 364])
    refits = [meter.observe(n, t) for n, t in windows]
    assert refits == [False] * (FIT_LEAST - 1) + [True]  # refitted every FIT_LEAST windows
    assert meter.current.overhead == pytest.approx(0.1) and meter.current.pace == pytest.approx(0.048)
    assert meter.add(Cost(pace=0.3)).overhead == pytest.approx(0.1)  # an idle figure: the fit stands
    clock.now += 10 * PACE_INTERVAL_S
    assert not meter.due()  # every window decoded measures a fitted cost: no idle decoding for it
    pinned = PaceMeter(remeasure=False, clock=HandClock())  # KOKORO_DECODER_PACE set
    pinned.add(Cost(pace=0.2))
    assert not any(pinned.observe(n, t) for n, t in windows)
    assert pinned.current == Cost(pace=0.2)


class _SlowEngine:
    """Decodes silence in ``OVERHEAD_S`` plus ``PER_FRAME_S`` a frame (sleeps: real time passes)."""

    OVERHEAD_S, PER_FRAME_S = 0.02, 0.0002
    name, device = "slow", "cpu"

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: object = None) -> Decoding:
        def decode(lo: int, hi: int, halt: object = None, **_: object) -> np.ndarray:
            time.sleep(self.OVERHEAD_S + (hi - lo) * self.PER_FRAME_S)
            return np.zeros((hi - lo) * 600, np.float32)
        return Decoding(frames=len(phonemes), decode=decode)


def _cost_after_decoding(*, remeasure: bool) -> Cost:
    """Chunks of 300 frames (one phoneme per frame, for this engine) decoded window by window: the
    cost the synthesizer sizes windows by afterwards."""

    async def scenario() -> Cost:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=_SlowEngine(), voices={"v": np.zeros((510, 1, 256), np.float32)},  # type: ignore[arg-type]
                            scheduler=scheduler)
        synth.keep_up(Cost(pace=0.05), remeasure=remeasure)
        try:
            for chunk in range(FIT_LEAST):
                result = await synth.submit(owner=chunk, phonemes="a" * 300, voice="v", speed=1.0)
                while result.decoding is not None:
                    result = await synth.submit_step(owner=chunk, decoding=result.decoding)
            return synth.cost
        finally:
            await scheduler.stop()
            synth.close()

    return asyncio.run(scenario())


def test_windows_are_sized_by_the_cost_fitted_to_the_windows_decoded() -> None:
    cost = _cost_after_decoding(remeasure=True)
    assert cost.overhead > 0  # every call slept 20 ms whatever its frames
    assert cost.overhead == pytest.approx(_SlowEngine.OVERHEAD_S, abs=0.01)
    assert _cost_after_decoding(remeasure=False) == Cost(pace=0.05)  # a pinned pace is never fitted


def test_the_warm_up_fits_a_cost_per_call_and_per_frame_before_the_first_request() -> None:
    """Windows of two sizes decoded at warm-up: the server's first windows are sized by the call's
    fixed cost and the per-frame pace, not by a pace that folds the one into the other."""

    async def scenario() -> tuple[Cost, bool, list[int]]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=_SlowEngine(), voices={"v": np.zeros((510, 1, 256), np.float32)},  # type: ignore[arg-type]
                            scheduler=scheduler)
        try:
            decoded = synth.measure_windows()
            synth.keep_up(Cost(pace=pace_of(decoded)), remeasure=True, decoded=decoded)
            return synth.cost, synth.pace.fitted, sorted({frames for frames, _ in decoded})
        finally:
            await scheduler.stop()
            synth.close()

    cost, fitted, sizes = asyncio.run(scenario())
    assert fitted and len(sizes) == 2 and sizes[1] >= 2 * sizes[0]
    assert cost.overhead == pytest.approx(_SlowEngine.OVERHEAD_S, abs=0.01)
    assert cost.pace == pytest.approx(_SlowEngine.PER_FRAME_S / FRAME_S, rel=0.5)
