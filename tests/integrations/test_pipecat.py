"""voicestream.integrations.pipecat inside a real pipecat 1.14 pipeline (Pipeline, PipelineWorker,
WorkerRunner, as pipecat's own test helper runs one), against the real tiny-model server: directly
(WebSocket) and through the SageMaker stand-in.

An LLM answer enters as pipecat's LLM service emits it (LLMFullResponseStartFrame, LLMTextFrame per
token, LLMFullResponseEndFrame); a processor after the TTS records what reaches the transport.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from kokoro_server_fixture import START_TIMEOUT_S, KokoroServer, kokoro_python
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner
from sagemaker_local_fixture import SageMakerLocal
from waiting import wait_until_async

from voicestream.clients import AudioChunk, connect_local
from voicestream.integrations._common import PieceCutter
from voicestream.integrations.pipecat import KokoroTTSService
from voicestream.launch import KokoroProcess, LaunchError

T = TypeVar("T")

ANSWER = ("Sure, I can help you plan the trip to the coast this weekend. The weather looks dry on Saturday. "
          "Pack a light jacket for the evening. The drive takes about three hours each way.")


def tokens(text: str) -> Iterator[str]:
    words = text.split(" ")
    yield words[0]
    for word in words[1:]:
        yield " " + word


class Sink(FrameProcessor):
    """Records every frame that reaches the transport, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []
        self.changed = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self.frames.append(frame)
        self.changed.set()
        await self.push_frame(frame, direction)

    async def wait_for(self, what: Callable[[list[Frame]], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not what(self.frames):
            self.changed.clear()
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out; frames: {[type(f).__name__ for f in self.frames][-30:]}"
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                pass

    def of(self, kind: type[T], context_id: str | None = None) -> list[T]:
        return [f for f in self.frames if isinstance(f, kind)
                and (context_id is None or getattr(f, "context_id", None) == context_id)]


async def in_pipeline(tts: KokoroTTSService, body: Callable[[PipelineWorker, Sink], Awaitable[None]],
                      sample_rate: int = 24000) -> Sink:
    sink = Sink()
    worker = PipelineWorker(Pipeline([tts, sink]), cancel_on_idle_timeout=False,
                            params=PipelineParams(audio_out_sample_rate=sample_rate))
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")  # type: ignore[untyped-decorator]
    async def _started(worker: Any, frame: Any) -> None:
        started.set()

    async def drive() -> None:
        await asyncio.wait_for(started.wait(), 30)
        try:
            await body(worker, sink)
        finally:
            await worker.stop_when_done()  # type: ignore[no-untyped-call]  # unannotated in pipecat

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    try:
        await asyncio.wait_for(drive(), 120)
        ended, _ = await asyncio.wait({running}, timeout=60)
        assert ended, "the pipeline did not end after EndFrame"
    finally:
        if not running.done():  # bounded: a pipeline that will not end is cancelled, then left
            await worker.cancel()
            await asyncio.wait({running}, timeout=30)
    running.result()
    return sink


async def answer(worker: PipelineWorker, text: str, token_s: float = 0.005) -> None:
    await worker.queue_frame(LLMFullResponseStartFrame())
    for token in tokens(text):
        await worker.queue_frame(LLMTextFrame(token))
        await asyncio.sleep(token_s)  # the LLM's pace
    await worker.queue_frame(LLMFullResponseEndFrame())


def check_words(sink: Sink, context_id: str, text: str, sample_rate: int = 24000) -> None:
    """The TTSTextFrames of a context: the text spoken, in order, timed inside its audio."""
    words = sink.of(TTSTextFrame, context_id)
    assert " ".join(w.text for w in words).split() == text.split()
    pts = [w.pts for w in words]
    assert all(p is not None and p > 0 for p in pts), pts
    times = [p for p in pts if p is not None]  # all of them
    assert times == sorted(times), pts
    audio = sink.of(TTSAudioRawFrame, context_id)
    assert {a.sample_rate for a in audio} == {sample_rate}
    duration_ns = sum(len(a.audio) for a in audio) / (2 * sample_rate) * 1e9
    assert times[-1] - times[0] <= duration_ns, (times[-1] - times[0], duration_ns)


def contexts(sink: Sink) -> list[str]:
    seen: list[str] = []
    for f in sink.of(TTSAudioRawFrame):
        assert f.context_id is not None  # the plugin gives every audio frame its context
        if f.context_id not in seen:
            seen.append(f.context_id)
    return seen


async def wait_idle(server: KokoroServer, timeout: float = 10.0) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        async def ping() -> Any:
            return (await client.get(f"{server.url}/ping")).json()

        state = await wait_until_async(ping, until=lambda s: s["queued"] == 0 and s["running"] == 0,
                                       timeout=timeout, interval=0.05)
    assert state["queued"] == 0 and state["running"] == 0, f"the server kept working: {state}"


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, 150)
    return asyncio.run(bounded())


def test_streamed_answer_audio_and_word_times(kokoro_server: KokoroServer) -> None:
    async def body(worker: PipelineWorker, sink: Sink) -> None:
        await answer(worker, ANSWER)
        await sink.wait_for(lambda frames: any(isinstance(f, TTSStoppedFrame) for f in frames))

    sink = run(in_pipeline(KokoroTTSService(url=kokoro_server.url, voice="am_michael"), body))
    assert not sink.of(ErrorFrame)
    [context_id] = contexts(sink)
    check_words(sink, context_id, ANSWER)
    assert sum(len(a.audio) for a in sink.of(TTSAudioRawFrame)) / 48000 > 2.0


def test_speak_frame_blend_and_other_rate(kokoro_server: KokoroServer) -> None:
    text = "Hello there. How are you today?"

    async def body(worker: PipelineWorker, sink: Sink) -> None:
        await worker.queue_frame(TTSSpeakFrame(text))
        await sink.wait_for(lambda frames: any(isinstance(f, TTSStoppedFrame) for f in frames))

    tts = KokoroTTSService(url=kokoro_server.url, voice="af_heart(2)+am_michael(1)", speed=1.2)
    sink = run(in_pipeline(tts, body, sample_rate=16000))
    [context_id] = contexts(sink)
    check_words(sink, context_id, text, sample_rate=16000)


def interrupted_then_next(server: KokoroServer, tts: KokoroTTSService, *, at_start: bool) -> None:
    long_answer = " ".join([ANSWER] * 6)
    after = "Okay, stopping there. What next?"

    async def body(worker: PipelineWorker, sink: Sink) -> None:
        if at_start:  # the answer's first clause has just reached the service
            await worker.queue_frame(LLMFullResponseStartFrame())
            for token in tokens("Sure, I can help you with that, and the trip to the"):
                await worker.queue_frame(LLMTextFrame(token))
            # (an InterruptionFrame is a system frame: it overtakes text still queued)
            await sink.wait_for(lambda frames: any(isinstance(f, TTSStartedFrame) for f in frames))
        else:
            await answer(worker, long_answer, token_s=0.0)
            await sink.wait_for(lambda frames: any(isinstance(f, TTSAudioRawFrame) for f in frames))
        await worker.queue_frame(InterruptionFrame())
        await sink.wait_for(lambda frames: any(isinstance(f, InterruptionFrame) for f in frames))
        await wait_idle(server)  # the cancel reached the server: it stopped synthesizing
        await answer(worker, after)
        await sink.wait_for(lambda frames: any(isinstance(f, TTSStoppedFrame) for f in frames))

    sink = run(in_pipeline(tts, body))
    assert not sink.of(ErrorFrame)
    cut = next(i for i, f in enumerate(sink.frames) if isinstance(f, InterruptionFrame))
    later = {f.context_id for f in sink.frames[cut:] if isinstance(f, TTSAudioRawFrame)}
    assert len(later) == 1, later  # only the next answer's audio after the interruption
    [context_id] = later
    assert context_id is not None
    check_words(sink, context_id, after)
    if not at_start:
        first = contexts(sink)[0]
        heard = sum(len(a.audio) for a in sink.of(TTSAudioRawFrame, first)) / 48000
        assert 0 < heard < 20.0, heard  # the whole long answer is over a minute


def test_interrupted_mid_utterance(kokoro_server: KokoroServer) -> None:
    interrupted_then_next(kokoro_server, KokoroTTSService(url=kokoro_server.url), at_start=False)


def test_interrupted_at_the_very_start(kokoro_server: KokoroServer) -> None:
    interrupted_then_next(kokoro_server, KokoroTTSService(url=kokoro_server.url), at_start=True)


def connection_errors(tts: KokoroTTSService) -> list[str]:
    """The ``on_connection_error`` reports of ``tts`` run in a pipeline until the first arrives."""
    errors: list[str] = []

    @tts.event_handler("on_connection_error")  # type: ignore[untyped-decorator]
    async def _error(service: Any, error: str) -> None:
        errors.append(error)

    async def body(worker: PipelineWorker, sink: Sink) -> None:
        async def reported() -> list[str]:
            return errors

        assert await wait_until_async(reported, timeout=20, interval=0.05), "no connection error reported"

    run(in_pipeline(tts, body))
    return errors


def test_unknown_voice_is_reported(kokoro_server: KokoroServer) -> None:
    assert "no_such_voice" in connection_errors(KokoroTTSService(url=kokoro_server.url, voice="no_such_voice"))[0]


def test_a_language_kokoro_has_not_is_reported(kokoro_server: KokoroServer) -> None:
    errors = connection_errors(KokoroTTSService(url=kokoro_server.url, lang="klingon"))
    assert "lang: 'klingon' is not a Kokoro language" in errors[0]


def test_through_sagemaker(sagemaker_local: SageMakerLocal, kokoro_server: KokoroServer,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint URL, CA and keys as arguments only (none in the environment)."""
    tts = KokoroTTSService(**sagemaker_local.plugin_options(monkeypatch))
    interrupted_then_next(kokoro_server, tts, at_start=False)


def test_sagemaker_options_belong_to_an_endpoint() -> None:
    with pytest.raises(ValueError, match="endpoint_url"):
        KokoroTTSService(url="http://127.0.0.1:1", endpoint_url="https://127.0.0.1:8443")
    with pytest.raises(ValueError, match="https"):
        KokoroTTSService(endpoint_name="kokoro-tts", endpoint_url="http://127.0.0.1:8443")


@pytest.fixture(scope="module")
def slow_server(kokoro_server: KokoroServer) -> Iterator[str]:
    """The real server on the tiny model, slow on purpose (tests/slow_kokoro.py): the first chunk's
    audio comes 5 s late, and the third chunk's 5 s after the second's."""
    tests = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="slow-kokoro-") as workdir:
        process = KokoroProcess(model_dir=kokoro_server.model_dir, python=kokoro_python(), module="slow_kokoro",
                                log_path=Path(workdir) / "server.log",
                                env={"PYTHONPATH": path, "SLOW_KOKORO_DELAYS": "5,0,5", "KOKORO_DEVICE": "cpu",
                                     "KOKORO_DEFAULT_VOICE": "", "KOKORO_ENGINE": ""})
        try:
            process.start(timeout_s=START_TIMEOUT_S)
        except LaunchError as exc:
            pytest.fail(str(exc))
        try:
            yield process.url
        finally:
            process.stop()


async def pcm_of(url: str, pieces: list[str]) -> int:
    """Bytes of 24 kHz pcm the server makes for ``pieces``, read with the plain client."""
    total = 0
    async with await connect_local(url) as session:
        await session.configure(format="pcm", sample_rate=24000)
        async for event in session.speak_stream(pieces):
            if isinstance(event, AudioChunk):
                total += len(event.data)
    return total


def test_a_slow_server_loses_no_audio(slow_server: str, kokoro_server: KokoroServer) -> None:
    """pipecat ends a context quiet for 3 s: the service keeps its contexts alive while the server
    still owes them audio (first audio after 5 s, then a 5 s gap), and ends each one itself."""
    cutter = PieceCutter()
    pieces = [p for token in tokens(ANSWER) for p in cutter.feed(token)] + cutter.flush()
    assert len(pieces) >= 3  # the delays fall on the first piece and the third
    expected = run(pcm_of(kokoro_server.url, pieces))  # the same model at full speed

    async def body(worker: PipelineWorker, sink: Sink) -> None:
        await answer(worker, ANSWER)
        await sink.wait_for(lambda frames: any(isinstance(f, TTSStoppedFrame) for f in frames), timeout=60)

    sink = run(in_pipeline(KokoroTTSService(url=slow_server), body))
    assert not sink.of(ErrorFrame)
    [context_id] = contexts(sink)
    audio = sink.of(TTSAudioRawFrame)
    assert sum(len(a.audio) for a in audio) == expected  # every sample arrived
    [stop] = sink.of(TTSStoppedFrame)  # once, after the last audio
    assert sink.frames.index(stop) > sink.frames.index(audio[-1])
    check_words(sink, context_id, ANSWER)
