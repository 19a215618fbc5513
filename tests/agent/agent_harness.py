"""Harness of the agent's tests: a REAL Kokoro server (tiny random-weight model, built once per
session) and the real agent app on 127.0.0.1 with the offline scripted model, fast-paced."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from voice_agent.app import create_app
from voice_agent.config import AgentConfig
from voice_agent.models import ScriptedModel
from voice_agent.speaking import TtsConnector

ROOT = Path(__file__).resolve().parents[2]
KOKORO_PYTHON = Path(os.environ.get("KOKORO_PYTHON", ROOT / ".venv-kokoro" / "bin" / "python"))
TTS_READY_TIMEOUT_S = 120.0
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


def poll(predicate: Any, *, timeout: float = 15.0, interval: float = 0.1) -> Any:
    """The first truthy value of ``predicate()``, or the last one after ``timeout`` (bounded loop)."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("AGENT_TEST_MODEL_DIR")
    if given and Path(given, "config.json").exists():
        return Path(given)
    assert KOKORO_PYTHON.exists(), f"{KOKORO_PYTHON} not found: run `make install` for the Kokoro environment"
    target = tmp_path_factory.mktemp("agent-tiny-model")
    subprocess.run([str(KOKORO_PYTHON), "-m", "kokoro_server.tiny_model", str(target)], check=True,
                   capture_output=True, timeout=300)
    return target


@pytest.fixture(scope="session")
def tts_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kokoro server; yields its base URL. ``AGENT_TEST_TTS_URL`` reuses one already running
    (quicker while iterating: the server takes tens of seconds to load and warm up)."""
    given = os.environ.get("AGENT_TEST_TTS_URL")
    if given:
        yield given.rstrip("/")
        return
    tiny_model_dir: Path = request.getfixturevalue("tiny_model_dir")
    port = free_port()
    log = (tmp_path_factory.mktemp("agent-tts-log") / "kokoro.log").open("wb")
    process = subprocess.Popen(
        [str(KOKORO_PYTHON), "-m", "kokoro_server", "serve", "--model-dir", str(tiny_model_dir),
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"the Kokoro server exited with {process.returncode}; see {log.name}")
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{url}/ping", timeout=2).status_code == 200
        return False

    try:
        if not poll(ready, timeout=TTS_READY_TIMEOUT_S, interval=0.5):
            raise RuntimeError(f"the Kokoro server was not ready within {TTS_READY_TIMEOUT_S:.0f} s")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def tts_idle(tts_url: str) -> bool:
    state: dict[str, Any] = httpx.get(f"{tts_url}/ping", timeout=5).json()
    return bool(state["sessions"] == 0 and state["queued"] == 0 and state["running"] == 0)


@dataclass(kw_only=True)
class RunningAgent:
    url: str
    app: Any

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
                send_timeout_s: float = 30.0) -> Iterator[RunningAgent]:
    """The real app under uvicorn in a thread on a free port."""
    config = AgentConfig(model="offline", offline_reason="tests", tts_url=tts_url, serve_page=page,
                         max_prompt_chars=500, send_timeout_s=send_timeout_s)
    app = create_app(config=config, models=lambda: scripted(answer=answer, token_ms=token_ms),
                     connect_tts=connect_tts)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           ws_max_size=1024 * 1024))
    thread = threading.Thread(target=server.run, name=f"agent-{port}", daemon=True)
    thread.start()
    if not poll(lambda: server.started or not thread.is_alive(), timeout=30):
        raise RuntimeError("the agent did not start")
    try:
        yield RunningAgent(url=f"http://127.0.0.1:{port}", app=app)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture(scope="session")
def agent(tts_url: str) -> Iterator[RunningAgent]:
    with serve_agent(tts_url=tts_url) as running:
        yield running

