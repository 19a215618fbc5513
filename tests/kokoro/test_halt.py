"""A cancelled job stops on the model, not only in the queue (engines/halt.py).

On the real int8 weights (onnx: onnxruntime ends a running ``session.run``) and the tiny torch
model (a check before each module), a decode halted while it runs raises Halted instead of
returning audio; one halted before it starts never starts; and through the synthesizer, a barge-in
(the utterance's futures cancelled) halts the window on the model, so the next answer's first job
is the next one the model runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import real_audio as ra

from kokoro_server.engines import Decoding, load_engine
from kokoro_server.engines.halt import Halt, Halted
from kokoro_server.model_dir import open_model_dir, style_for
from kokoro_server.scheduler import Scheduler
from kokoro_server.sizing import Cost
from kokoro_server.speech import Speech
from kokoro_server.synth import Synthesizer

pytestmark = pytest.mark.kokoro

LONG = ("Routers work best in the open, up high and near the middle of your home, because walls, "
        "mirrors and fish tanks all soak up the signal before it ever reaches the rooms where you need it most.")
VOICE = "af_heart"


class WatchedHalt(Halt):
    """A Halt that says when the engine started watching it: the run it guards is under way."""

    def __init__(self) -> None:
        super().__init__()
        self.watched = threading.Event()

    def watching(self, on_halt: Callable[[], None]) -> Any:
        context = super().watching(on_halt)
        self.watched.set()
        return context


def test_a_halt_stops_its_hooks_once_and_refuses_new_work() -> None:
    halt, calls = Halt(), []
    with halt.watching(lambda: calls.append("stop")):
        halt.set()
        halt.set()
    assert calls == ["stop"] and halt.is_set
    with pytest.raises(Halted), halt.watching(lambda: calls.append("late")):
        pass
    with pytest.raises(Halted):
        halt.check()
    assert calls == ["stop"]


def test_a_cancelled_future_halts_its_job() -> None:
    async def main() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        kept, cancelled = loop.create_future(), loop.create_future()
        halts = Halt(), Halt()
        for future, halt in zip((kept, cancelled), halts):
            future.add_done_callback(halt.when_cancelled)
        kept.set_result(None)
        cancelled.cancel()
        await asyncio.sleep(0)  # done callbacks run on the next loop turn
        return halts[0].is_set, halts[1].is_set

    assert asyncio.run(main()) == (False, True)


def _halted_mid_run(decode: Callable[[Halt], Any]) -> BaseException | None:
    """Run ``decode(halt)`` in a thread, set the halt once the engine watches it; what it raised."""
    halt = WatchedHalt()
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            decode(halt)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the outcome is the assertion
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert halt.watched.wait(60), "the engine never started the run"
    halt.set()
    worker.join(120)
    assert not worker.is_alive()
    return outcome[0]


@pytest.fixture(scope="module")
def long_decoding() -> Iterator[Callable[[], Decoding]]:
    engine = ra.engine()
    [phonemes] = ra.phonemizer().phonemize(LONG, voice=VOICE)
    style = style_for(ra.model().voices[VOICE], phonemes)
    yield lambda: engine.begin(phonemes, style, 1.0)


def test_onnx_stops_a_running_decode(long_decoding: Callable[[], Decoding]) -> None:
    decoding = long_decoding()  # one window: the whole sentence, seconds of decoder time here
    assert isinstance(_halted_mid_run(lambda halt: decoding.step(decoding.frames, halt)), Halted)
    assert not decoding.done  # the window was not decoded: nothing half made is handed on
    assert decoding.rest().size == decoding.frames * 600  # and the engine serves the next call whole


def test_onnx_starts_nothing_for_a_halted_job(long_decoding: Callable[[], Decoding]) -> None:
    halt = Halt()
    halt.set()
    engine = ra.engine()
    [phonemes] = ra.phonemizer().phonemize("Hello there.", voice=VOICE)
    with pytest.raises(Halted):
        engine.begin(phonemes, style_for(ra.model().voices[VOICE], phonemes), 1.0, halt=halt)
    with pytest.raises(Halted):
        long_decoding().step(20, halt)


def test_torch_stops_a_running_decode(tiny_model: Path) -> None:
    model = open_model_dir(tiny_model)
    engine = load_engine(model)
    voice = sorted(model.voices)[0]
    phonemes = "hˈɛloʊ ðˈɛɹ, hˌaʊ ɑɹ jˈu tədˈeɪ? aɪm fˈaɪn, θˈæŋk jˈu."
    decoding = engine.begin(phonemes, style_for(model.voices[voice], phonemes), 1.0)

    class Tripwire(Halt):  # halted from inside the forward, at its 5th block
        checks = 0

        def check(self) -> None:
            self.checks += 1
            if self.checks == 5:
                self.set()
            super().check()

    tripwire = Tripwire()
    with pytest.raises(Halted):
        decoding.step(decoding.frames, tripwire)
    assert tripwire.checks == 5  # the next block did not run
    assert not decoding.done
    assert decoding.rest().size == decoding.frames * decoding.samples_per_frame


def test_a_barge_in_halts_the_window_on_the_model() -> None:
    """Through the synthesizer: a long answer's second window is on the model when its speech is
    cancelled; that window stops (Halted), and the next answer's front is the next model call."""
    calls: list[str] = []
    second_window = threading.Event()
    cancelled = threading.Event()

    async def main() -> None:
        engine = ra.engine()
        scheduler = Scheduler()
        await scheduler.start()
        synth = Synthesizer(engine=engine, voices=ra.model().voices, scheduler=scheduler, vocab=ra.model().vocab)
        synth.keep_up(Cost(pace=0.6))  # a slow decoder's windows: a long sentence is several
        real_begin = engine.begin

        def begin(phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
            calls.append("begin")
            decoding = real_begin(phonemes, style, speed, halt=halt)
            decode = decoding.decode

            def traced(lo: int, hi: int, halt: Halt | None = None, **_: object) -> np.ndarray:
                if calls.count("decoded") == 1 and not second_window.is_set():  # the long answer's 2nd window
                    second_window.set()
                    assert cancelled.wait(60), "the test never cancelled"
                try:
                    audio = decode(lo, hi, halt)
                except Halted:
                    calls.append("halted")
                    raise
                calls.append("decoded")
                return audio

            decoding.decode = traced
            return decoding

        engine.begin = begin  # type: ignore[method-assign]
        try:
            owner = object()
            long = Speech(synth, owner=owner, pieces=[LONG], voice=VOICE, speed=1.0)
            await anext(long.__aiter__())  # its first window is heard
            assert await asyncio.to_thread(second_window.wait, 60), "a one-window plan: nothing to halt"
            long.cancel()  # a barge-in, as Turns.drop cancels a session's utterances
            scheduler.cancel_owner(owner)
            await asyncio.sleep(0)  # the futures' done callbacks run: the halt is set
            cancelled.set()
            short = Speech(synth, owner=owner, pieces=["Okay."], voice=VOICE, speed=1.0)
            first = await anext(short.__aiter__())
            assert first.synthesis.audio.size > 0
            short.cancel()
        finally:
            del engine.begin
            await scheduler.stop()
            synth.close()

    asyncio.run(main())
    assert calls[:4] == ["begin", "decoded", "halted", "begin"], calls  # the next answer came next
