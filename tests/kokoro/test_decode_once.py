"""The synthesizer asks the job sizer once per job, as the job starts, with the listener's real queue
(docs/throughput.md): a listener far enough ahead gets a chunk in one window, one with nothing queued
a small first window, and the decoder cost the sizer reads is re-measured.

A frame-exact engine (its samples for a frame do not depend on the window) stands for a perfect
model, so a chunk in any windows must give back exactly the one-shot signal.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hand_clock import HandClock

from kokoro_server.engines import Synthesis
from kokoro_server.engines.halt import Halt
from kokoro_server.engines.windows import CONTEXT, CROSSFADE, OPENING_CONTEXT, Decode, Decoding
from kokoro_server.pace import PACE_INTERVAL_S, PaceMeter
from kokoro_server.scheduler import Scheduler
from kokoro_server.sizing import Cost, Situation, Sizer
from kokoro_server.speech import Speech
from kokoro_server.synth import Synthesizer

pytestmark = pytest.mark.kokoro

PER_FRAME = 600


def _decoder(signal: np.ndarray, calls: list[tuple[int, int]]) -> Decode:
    def decode(lo: int, hi: int, halt: Halt | None = None, **_: object) -> np.ndarray:
        calls.append((lo, hi))
        return signal[lo * PER_FRAME:hi * PER_FRAME].copy()
    return decode


class _Engine:
    """A frame-exact engine: every chunk is ``frames`` frames of seeded noise; ``calls`` records the
    frames each decoder call decoded."""

    name, device = "exact", "cpu"

    def __init__(self, frames: int) -> None:
        self.frames = frames
        self.calls: list[tuple[int, int]] = []
        self.signal = np.random.default_rng(frames).standard_normal(frames * PER_FRAME).astype(np.float32)

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
        return Decoding(frames=self.frames, decode=_decoder(self.signal, self.calls))

    def synthesize(self, phonemes: str, style: np.ndarray, speed: float) -> Synthesis:
        raise AssertionError("the Synthesizer decodes through begin()")


def _speak(frames: int, cost: Cost, queued_s: float) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """One chunk of ``frames`` spoken by an owner whose listener has ``queued_s`` of audio queued
    (the clock stands still): the decoder calls, the audio, and the engine's one-shot signal."""
    engine = _Engine(frames)

    async def scenario() -> np.ndarray:
        scheduler = Scheduler(clock=HandClock())
        await scheduler.start()
        synth = Synthesizer(engine=engine, voices={"af_v": np.zeros((510, 1, 256), np.float32)}, scheduler=scheduler)
        synth.keep_up(cost)
        try:
            if queued_s:
                await scheduler.submit("o", lambda: queued_s, audio_s=float)
            return np.concatenate([c.synthesis.audio async for c in Speech(synth, owner="o", pieces=["x"],
                                                                            voice="af_v", speed=1.0)])
        finally:
            await scheduler.stop()
            synth.close()

    audio = asyncio.run(scenario())  # the frame-exact engine ignores the text: G2P gives one chunk
    return engine.calls, audio, engine.signal


@pytest.mark.parametrize("queued_s", [0.0, 1.0, 3.0, 12.0])
def test_each_window_is_what_the_sizer_gives_the_listeners_real_queue(queued_s: float) -> None:
    """The clock stands still, so the listener's queue is what it had plus every window made."""
    cost, frames = Cost(pace=0.15), 400  # one window decodes the chunk in 1.5 s
    calls, audio, signal = _speak(frames, cost, queued_s)
    np.testing.assert_allclose(audio, signal, atol=1e-6)
    done, expected = 0, []
    while done < frames:
        size = Sizer().next_window(Situation(left=frames - done, started=bool(done), cost=cost,
                                             queued_s=queued_s + done * 0.025))
        end = min(frames, done + size)
        after = CONTEXT if done else OPENING_CONTEXT
        expected.append((max(0, done - CONTEXT), frames if end == frames else end + CROSSFADE + after))
        done = end
    assert calls == expected
    assert (len(calls) == 1) == (queued_s >= 3.0)  # 0.7 of 3 s covers the whole chunk: one window


def test_pace_is_the_median_of_recent_figures_and_remeasured_only_when_due() -> None:
    clock = HandClock()
    meter = PaceMeter(remeasure=True, clock=clock)
    assert meter.add(Cost(pace=0.4)).pace == 0.4  # a busy warm-up
    assert not meter.due()
    clock.now += PACE_INTERVAL_S
    assert meter.due()
    meter.add(Cost(pace=0.2))
    assert meter.add(Cost(pace=0.21)).pace == 0.21  # two quiet idle figures outvote it
    assert not meter.due()
    pinned = PaceMeter(remeasure=False, clock=clock)
    clock.now += 10 * PACE_INTERVAL_S
    assert not pinned.due()  # KOKORO_DECODER_PACE set: never re-measured
