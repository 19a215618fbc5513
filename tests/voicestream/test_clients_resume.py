"""Across a redeploy, no sentence is lost and none is spoken twice.

Two real servers behind a router that, like SageMaker, sends each new connection to an instance
whose /ping answers 200 (tests/healthy_router.py). Mid-turn the first server gets SIGTERM: it
finishes the sentence it is speaking and closes with 1001; the client (local WebSocket, and the
SageMaker HTTP/2 SDK through the stand-in) connects again, lands on the second server and sends
what got no answer. The turn's audio must be each sentence's audio exactly once, as long as a
run with no restart makes it.
"""

from __future__ import annotations

import asyncio
import signal
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from healthy_router import HealthyRouter
from kokoro_server_fixture import REPO, KokoroServer
from sagemaker_local_fixture import ACCESS_KEY_ID, SECRET_ACCESS_KEY

from standins.sagemaker_runtime.launch import StandInProcess
from voicestream.clients import connect_local, connect_sagemaker
from voicestream.clients.base import TtsSession
from voicestream.clients.events import AudioChunk, TurnEnd, UtteranceEnd, UtteranceStart
from voicestream.launch import KokoroProcess

SENTENCES = [f"Sentence number {n} of an answer that goes on while the server is replaced." for n in range(1, 7)]
IDS = [f"s{n}" for n in range(1, 7)]


async def speak_turn(session: TtsSession, *, on_first_end: Callable[[], None] | None = None) -> list[object]:
    """Speak SENTENCES as one turn (sent at once, pipelined); every event up to turn_end."""
    for uid, text in zip(IDS, SENTENCES, strict=True):
        await session.speak(text, id=uid)
    await session.flush()
    events: list[object] = []
    async for event in session.events():
        events.append(event)
        if isinstance(event, UtteranceEnd) and on_first_end is not None:
            on_first_end()
            on_first_end = None
        if isinstance(event, TurnEnd):
            return events
    raise AssertionError("unreachable")


def audio_by_utterance(events: list[object]) -> dict[str, int]:
    sizes: Counter[str] = Counter()
    for event in events:
        if isinstance(event, AudioChunk):
            assert event.utterance_id is not None
            sizes[event.utterance_id] += len(event.data)
    return dict(sizes)


@pytest.fixture()
def reference(kokoro_server: KokoroServer) -> dict[str, int]:
    """Each sentence's pcm bytes with no restart (durations are the model's: the same every run)."""

    async def run() -> dict[str, int]:
        session = await connect_local(kokoro_server.url)
        try:
            return audio_by_utterance(await speak_turn(session))
        finally:
            await session.close()

    return asyncio.run(asyncio.wait_for(run(), 120))


def check_exactly_once(events: list[object], reference: dict[str, int]) -> None:
    starts = [e.id for e in events if isinstance(e, UtteranceStart)]
    ends = [e.id for e in events if isinstance(e, UtteranceEnd)]
    assert starts == IDS and ends == IDS, (starts, ends)
    assert audio_by_utterance(events) == reference
    assert sum(isinstance(e, TurnEnd) for e in events) == 1


def run_with_restart(first: KokoroProcess, connect: Callable[[str], Awaitable[TtsSession]], url: str,
                     router: HealthyRouter) -> tuple[list[object], int]:
    async def body() -> tuple[list[object], int]:
        session = await connect(url)
        try:
            process = first.process
            assert process is not None
            stop = lambda: process.send_signal(signal.SIGTERM)  # noqa: E731 - mid-turn
            events = await speak_turn(session, on_first_end=stop)
            return events, session.resumes
        finally:
            await session.close()

    return asyncio.run(asyncio.wait_for(body(), 180))


def test_a_turn_survives_its_server_stopping_over_the_local_websocket(
    kokoro_server: KokoroServer, stopping_server: KokoroProcess, reference: dict[str, int],
) -> None:
    async def scenario() -> tuple[list[object], int, dict[str, int]]:
        async with HealthyRouter([stopping_server.url, kokoro_server.url]) as router:
            loop = asyncio.get_running_loop()
            events, resumes = await loop.run_in_executor(
                None, run_with_restart, stopping_server, connect_local, router.url, router)
            return events, resumes, router.routed

    events, resumes, routed = asyncio.run(scenario())
    check_exactly_once(events, reference)
    assert resumes == 1
    assert routed == {stopping_server.url: 1, kokoro_server.url: 1}
    assert stopping_server.process is not None and stopping_server.process.wait(timeout=30) == 0


def test_a_turn_survives_its_server_stopping_through_the_sagemaker_bidi_stream(
    kokoro_server: KokoroServer, stopping_server: KokoroProcess, reference: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> tuple[list[object], int, dict[str, int]]:
        async with HealthyRouter([stopping_server.url, kokoro_server.url]) as router:
            with tempfile.TemporaryDirectory(prefix="sagemaker-local-") as state:
                standin = StandInProcess(container_url=router.url, state_dir=Path(state), cwd=REPO,
                                         access_key_id=ACCESS_KEY_ID, secret_access_key=SECRET_ACCESS_KEY)
                info = await asyncio.to_thread(standin.start)
                try:
                    for key, value in {
                        "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
                        "AWS_REGION": info.region, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": info.endpoint_url,
                        "AWS_CA_BUNDLE": info.ca_bundle,
                    }.items():
                        monkeypatch.setenv(key, value)

                    async def connect(name: str) -> TtsSession:
                        return await connect_sagemaker(name, region=info.region)

                    loop = asyncio.get_running_loop()
                    events, resumes = await loop.run_in_executor(
                        None, run_with_restart, stopping_server, connect, info.endpoint_name, router)
                finally:
                    await asyncio.to_thread(standin.stop)
            return events, resumes, router.routed

    events, resumes, routed = asyncio.run(scenario())
    check_exactly_once(events, reference)
    assert resumes == 1
    assert routed[stopping_server.url] >= 1 and routed[kokoro_server.url] >= 1
    assert stopping_server.process is not None and stopping_server.process.wait(timeout=30) == 0
