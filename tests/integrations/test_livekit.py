"""voicestream.integrations.livekit inside LiveKit Agents 1.8.9's own TTS stream API, against the real
tiny-model server: directly (WebSocket) and through the SageMaker stand-in.

An LLM answer is pushed token by token as LiveKit's agent pipeline pushes it (``push_text``, then
``end_input``); what comes back is read as LiveKit reads it (``SynthesizedAudio`` frames, the
``TimedString``s LiveKit's transcription synchronizer takes from the frames' userdata).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterator
from typing import TypeVar

import httpx
import pytest
from kokoro_server_fixture import KokoroServer
from livekit.agents import APIConnectOptions, APIError, tts
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT, TimedString
from sagemaker_local_fixture import SageMakerLocal
from waiting import wait_until_async

from voicestream.integrations.livekit import KokoroTTS

T = TypeVar("T")

ANSWER = ("Sure, I can help you plan the trip to the coast this weekend. The weather looks dry on Saturday. "
          "Pack a light jacket for the evening. The drive takes about three hours each way. "
          "Leave early to miss the traffic near the bridge.")


def run(coro: Awaitable[T], timeout: float = 90.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


def tokens(text: str) -> Iterator[str]:
    """About how an LLM streams: a word (with its leading space) at a time."""
    words = text.split(" ")
    yield words[0]
    for word in words[1:]:
        yield " " + word


class Collected:
    def __init__(self) -> None:
        self.frames: list[tts.SynthesizedAudio] = []
        self.timed: list[TimedString] = []

    def add(self, ev: tts.SynthesizedAudio) -> None:
        self.frames.append(ev)
        self.timed.extend(ev.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT) or [])

    @property
    def duration(self) -> float:
        return sum(ev.frame.duration for ev in self.frames)

    def check_timestamps(self, text: str) -> None:
        """In order, inside the audio, and together the text that was spoken."""
        assert self.timed, "no aligned transcript came with the audio"
        starts = [t.start_time for t in self.timed]
        times = [s for s in starts if isinstance(s, float)]
        assert times == starts, starts  # every word timed
        assert times == sorted(times), starts
        for t in self.timed:
            assert isinstance(t.start_time, float) and isinstance(t.end_time, float), t
            assert 0.0 <= t.start_time <= t.end_time <= self.duration + 1e-3, (t, self.duration)
        assert "".join(self.timed).split() == text.split()


async def speak_answer(stream: tts.SynthesizeStream, text: str, *, token_s: float = 0.005) -> Collected:
    async def feed() -> None:
        for token in tokens(text):
            stream.push_text(token)
            await asyncio.sleep(token_s)  # the LLM's pace, not a wait for a result
        stream.end_input()

    feeder = asyncio.create_task(feed())
    got = Collected()
    async for ev in stream:
        got.add(ev)
    await feeder
    return got


async def ping(server: KokoroServer) -> dict[str, object]:
    async with httpx.AsyncClient(trust_env=False) as client:
        body: dict[str, object] = (await client.get(f"{server.url}/ping")).json()
        return body


async def wait_idle(server: KokoroServer, timeout: float = 10.0) -> dict[str, object]:
    """Bounded poll: the server has no model job queued or running."""
    state = await wait_until_async(lambda: ping(server), until=lambda s: s["queued"] == 0 and s["running"] == 0,
                                   timeout=timeout, interval=0.05)
    assert state["queued"] == 0 and state["running"] == 0, f"the server kept working: {state}"
    return state


def test_declares_streaming_and_aligned_transcripts(kokoro_server: KokoroServer) -> None:
    engine = KokoroTTS(url=kokoro_server.url)
    assert engine.capabilities.streaming and engine.capabilities.aligned_transcript
    assert engine.sample_rate == 24000 and engine.num_channels == 1
    with pytest.raises(ValueError):
        KokoroTTS(url=kokoro_server.url, endpoint_name="also")
    with pytest.raises(ValueError):
        KokoroTTS(url=kokoro_server.url, sample_rate=11025)


def test_streamed_answer_audio_and_word_times(kokoro_server: KokoroServer, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with KokoroTTS(url=kokoro_server.url, voice="am_michael") as engine:
            async with engine.stream() as stream:
                got = await speak_answer(stream, ANSWER)
        assert got.duration > 2.0
        assert {ev.frame.sample_rate for ev in got.frames} == {24000}
        ids = {ev.request_id for ev in got.frames}
        assert len(ids) == 1 and "unknown" not in ids
        assert got.frames[-1].is_final
        got.check_timestamps(ANSWER)

    with caplog.at_level(logging.WARNING):
        run(main())
    assert "no request_id provided" not in caplog.text


def test_synthesize_one_shot_and_other_rate_and_blend(kokoro_server: KokoroServer) -> None:
    async def main() -> None:
        async with KokoroTTS(url=kokoro_server.url, voice="af_heart(2)+am_michael(1)", speed=1.2,
                             sample_rate=16000) as engine:
            got = Collected()
            async with engine.synthesize("Hello there. How are you today?") as chunked:
                async for ev in chunked:
                    got.add(ev)
        assert {ev.frame.sample_rate for ev in got.frames} == {16000}
        assert got.duration > 0.5
        got.check_timestamps("Hello there. How are you today?")

    run(main())


def test_an_answer_with_nothing_to_say_ends(kokoro_server: KokoroServer) -> None:
    async def main() -> None:
        async with KokoroTTS(url=kokoro_server.url) as engine:
            async with engine.stream() as stream:  # e.g. an LLM turn that was only a tool call
                stream.end_input()
                frames = [ev async for ev in stream]
            assert frames == []
            async with engine.stream() as stream2:  # and the session is still good
                got = await speak_answer(stream2, "Done.")
            got.check_timestamps("Done.")

    run(main(), timeout=30)


def test_unknown_voice_is_refused_without_retrying(kokoro_server: KokoroServer) -> None:
    async def main() -> None:
        async with KokoroTTS(url=kokoro_server.url, voice="no_such_voice") as engine:
            with pytest.raises(APIError, match="no_such_voice"):
                await engine.synthesize("Hello there.").collect()

    run(main())


def test_the_language_reaches_the_server(kokoro_server: KokoroServer) -> None:
    """``lang`` is the session's language: Japanese is spoken, a code Kokoro has not is refused, named."""
    async def main() -> None:
        async with KokoroTTS(url=kokoro_server.url, lang="j") as engine:
            frames = await engine.synthesize("こんにちは。").collect()
            assert frames.samples_per_channel > 0
        async with KokoroTTS(url=kokoro_server.url, lang="klingon") as engine:
            with pytest.raises(APIError, match="lang: 'klingon' is not a Kokoro language"):
                await engine.synthesize("Hello there.").collect()

    run(main())


def test_interrupted_mid_utterance_then_next_answer(kokoro_server: KokoroServer) -> None:
    long_answer = " ".join([ANSWER] * 6)

    async def main() -> None:
        async with KokoroTTS(url=kokoro_server.url) as engine:
            stream = engine.stream()
            for token in tokens(long_answer):
                stream.push_text(token)
            stream.end_input()
            first = await anext(stream)  # the answer is being spoken
            assert first.frame.duration > 0
            await stream.aclose()  # LiveKit's interruption
            await wait_idle(kokoro_server)  # cancel reached the server: it stopped synthesizing
            sessions = (await ping(kokoro_server))["sessions"]
            # the next answer reuses the session and hears none of the cancelled one
            async with engine.stream() as stream2:
                got = await speak_answer(stream2, "Okay, stopping there. What next?")
            got.check_timestamps("Okay, stopping there. What next?")
            assert (await ping(kokoro_server))["sessions"] == sessions

    run(main())


def test_interrupted_at_the_very_start(kokoro_server: KokoroServer) -> None:
    async def main() -> None:
        async with KokoroTTS(url=kokoro_server.url) as engine:
            stream = engine.stream()
            stream.push_text("Sure, I can help you plan the trip to the coast")
            await asyncio.sleep(0)  # the first piece may or may not have left: both must hold
            await stream.aclose()
            await wait_idle(kokoro_server)
            async with engine.stream() as stream2:
                got = await speak_answer(stream2, "Never mind. Goodbye.")
            got.check_timestamps("Never mind. Goodbye.")

    run(main())


def test_through_sagemaker(sagemaker_local: SageMakerLocal, kokoro_server: KokoroServer,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in sagemaker_local.client_env().items():
        monkeypatch.setenv(key, value)

    async def main() -> None:
        async with KokoroTTS(endpoint_name=sagemaker_local.endpoint_name, region=sagemaker_local.region,
                             voice="af_heart") as engine:
            async with engine.stream() as stream:
                got = await speak_answer(stream, ANSWER)
            got.check_timestamps(ANSWER)
            stream = engine.stream()
            for token in tokens(" ".join([ANSWER] * 4)):
                stream.push_text(token)
            stream.end_input()
            await anext(stream)
            await stream.aclose()
            await wait_idle(kokoro_server)
            async with engine.stream() as stream2:
                again = await speak_answer(stream2, "Right, a shorter answer.")
            again.check_timestamps("Right, a shorter answer.")

    run(main())


def test_sagemaker_options_belong_to_an_endpoint() -> None:
    with pytest.raises(ValueError, match="endpoint_url"):
        KokoroTTS(url="http://127.0.0.1:1", endpoint_url="https://127.0.0.1:8443")
    with pytest.raises(ValueError, match="https"):
        KokoroTTS(endpoint_name="kokoro-tts", endpoint_url="http://127.0.0.1:8443")
    with pytest.raises(ValueError, match="aws_secret_access_key"):
        KokoroTTS(endpoint_name="kokoro-tts", aws_access_key_id="AKIDEXAMPLE")


def test_twenty_interrupts_through_sagemaker_leave_every_next_answer_whole(
    sagemaker_local: SageMakerLocal, kokoro_server: KokoroServer, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LiveKit closes the stream on every barge-in: before the first piece left, before the first
    audio, after a few frames. Every next answer works first time (no retry allowed) and nothing
    is logged: the pooled HTTP/2 session is never handed out broken."""
    once = APIConnectOptions(max_retry=0, timeout=15.0)
    long_answer = " ".join([ANSWER] * 3)

    async def main() -> None:
        async with KokoroTTS(voice="af_heart", **sagemaker_local.plugin_options(monkeypatch)) as engine:
            for i in range(20):
                stream = engine.stream(conn_options=once)
                for token in tokens(long_answer):
                    stream.push_text(token)
                stream.end_input()
                if i % 4 == 1:
                    await asyncio.sleep(0)  # the first piece may or may not have left
                for _ in range(max(0, i % 4 - 1)):  # 0, 1 or 2 frames heard before the barge-in
                    await anext(stream)
                await stream.aclose()
                if i % 5 == 4:  # now and then an answer heard to its end in between
                    async with engine.stream(conn_options=once) as whole:
                        got = await speak_answer(whole, "Right, a shorter answer.")
                    got.check_timestamps("Right, a shorter answer.")
            async with engine.stream(conn_options=once) as last:
                got = await speak_answer(last, "Okay. What next?")
            got.check_timestamps("Okay. What next?")

    with caplog.at_level(logging.WARNING):
        run(main(), timeout=240)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
