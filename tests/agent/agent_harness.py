"""Harness of the agent's tests: a REAL Kokoro server (tiny random-weight model, built once per
session) and the real agent app on 127.0.0.1 with the offline scripted model, fast-paced."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from kokoro_server_fixture import KokoroServer
from waiting import wait_until

from voice_agent.app import create_app
from voice_agent.config import DEFAULT_REGION, AgentConfig
from voice_agent.models import ScriptedModel
from voice_agent.speaking import TtsConnector

# Short answers keep the tiny model's CPU synthesis (about a second a sentence) cheap. The first
# piece is an early fragment (five words, then a comma), then two whole sentences.
ANSWER = "Hello from the offline model, speaking right now. This is the second sentence. And a third one ends it."
PIECES = ["Hello from the offline model,", "speaking right now.", "This is the second sentence.",
          "And a third one ends it."]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scripted(*, answer: str = ANSWER, token_ms: tuple[int, int] = (5, 15)) -> ScriptedModel:
    return ScriptedModel(answers=[answer], token_ms=token_ms, first_token_ms=40)


@pytest.fixture(scope="session")
def tts_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A real Kokoro server's base URL: the one tooling tests share (tests/kokoro_server_fixture.py),
    or ``AGENT_TEST_TTS_URL`` for one already running (quicker while iterating)."""
    given = os.environ.get("AGENT_TEST_TTS_URL")
    if given:
        yield given.rstrip("/")
        return
    server: KokoroServer = request.getfixturevalue("kokoro_server")
    yield server.url


def tts_idle(tts_url: str) -> bool:
    state: dict[str, Any] = httpx.get(f"{tts_url}/ping", timeout=5).json()
    return bool(state["sessions"] == 0 and state["queued"] == 0 and state["running"] == 0)


def fd_count() -> int:
    """File descriptors open in this process (the agent runs in it, in a thread)."""
    return len(os.listdir("/proc/self/fd"))


@dataclass(kw_only=True)
class RunningAgent:
    url: str
    app: Any
    loop: asyncio.AbstractEventLoop  # the agent server's event loop (its thread's)

    def tasks(self) -> int:
        """asyncio tasks alive on the agent's loop now (counted there, the counting task included)."""

        async def count() -> int:
            return len(asyncio.all_tasks())

        return asyncio.run_coroutine_threadsafe(count(), self.loop).result(timeout=10)

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"

    def running(self) -> dict[str, int]:
        """The agent's own registry: turns and TTS sessions alive now."""
        snapshot: dict[str, int] = self.app.state.voice.registry.snapshot()
        snapshot["agentcore_tasks"] = self.app.get_async_task_info()["active_count"]
        return snapshot

    def idle(self) -> bool:
        return self.running() == {"turns": 0, "tts_sessions": 0, "agentcore_tasks": 0}


@contextlib.contextmanager
def serve_agent(*, tts_url: str | None, answer: str = ANSWER, token_ms: tuple[int, int] = (5, 15),
                connect_tts: TtsConnector | None = None, page: bool = False,
                send_timeout_s: float = 30.0, tts_endpoint: str | None = None,
                region: str = DEFAULT_REGION) -> Iterator[RunningAgent]:
    """The real app under uvicorn in a thread on a free port (its TTS at ``tts_url``, or the
    SageMaker endpoint ``tts_endpoint`` in ``region``)."""
    config = AgentConfig(model="offline", offline_reason="tests", tts_url=tts_url, serve_page=page,
                         max_prompt_chars=500, send_timeout_s=send_timeout_s, tts_endpoint=tts_endpoint,
                         region=region)
    app = create_app(config=config, models=lambda: scripted(answer=answer, token_ms=token_ms),
                     connect_tts=connect_tts)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           ws_max_size=1024 * 1024))
    thread = threading.Thread(target=server.run, name=f"agent-{port}", daemon=True)
    thread.start()
    if not wait_until(lambda: server.started or not thread.is_alive(), timeout=30):
        raise RuntimeError("the agent did not start")
    try:
        yield RunningAgent(url=f"http://127.0.0.1:{port}", app=app, loop=server.servers[0].get_loop())
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture(scope="session")
def agent(tts_url: str) -> Iterator[RunningAgent]:
    with serve_agent(tts_url=tts_url) as running:
        yield running


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright import sync_api

    # A prerequisite (README, "Set up"), not an optional extra: fail loudly rather than skip.
    assert shutil.which(CHROMIUM), "Debian chromium is not installed: apt-get install -y chromium"
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


def stats(page: Any) -> dict[str, Any]:
    value: dict[str, Any] = page.evaluate("() => JSON.parse(JSON.stringify(window.__voiceStats))")
    return value
