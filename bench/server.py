"""The Kokoro server under test: a subprocess on a free loopback port, and waits on its /ping.

Every wait is bounded so a wedged server fails the benchmark instead of hanging it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .measure import BenchError, now

QUIESCE_TIMEOUT_S = 60.0
START_TIMEOUT_S = 240.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """``python -m kokoro_server serve`` from the Kokoro environment, on a free loopback port."""

    python: Path
    model_dir: Path
    log_path: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_s: float = 0.0  # seconds from spawn to the first 200 from /ping

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """Start and wait for /ping; return its JSON. Raises BenchError with the log's tail."""
        self.port = self.port or free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for name in ("KOKORO_MODEL_DIR", "PORT", "KOKORO_HOST"):
            env.pop(name, None)
        env.update(self.env_overrides)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        began = now()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(self.python), "-m", "kokoro_server", "serve", "--model-dir", str(self.model_dir),
                 "--host", "127.0.0.1", "--port", str(self.port)],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = began + timeout_s
        while True:
            if self.process.poll() is not None:
                raise BenchError(f"the Kokoro server exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                response = httpx.get(f"{self.url}/ping", timeout=2.0, trust_env=False)
                if response.status_code == 200:
                    self.started_s = now() - began
                    return dict(response.json())
            except httpx.HTTPError:
                pass
            if now() > deadline:
                tail = self.log_tail()
                self.stop()
                raise BenchError(f"the Kokoro server did not answer /ping within {timeout_s:.0f} s:\n{tail}")
            time.sleep(0.25)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


async def ping(client: httpx.AsyncClient, base_url: str) -> dict[str, Any]:
    response = await client.get(f"{base_url}/ping", timeout=5.0)
    response.raise_for_status()
    return dict(response.json())


async def quiesce(client: httpx.AsyncClient, base_url: str, *, timeout_s: float = QUIESCE_TIMEOUT_S) -> bool:
    """Wait until the server has no session and no model job, so runs do not overlap. False if
    it is still busy after ``timeout_s`` (the caller records it)."""
    deadline = now() + timeout_s
    while now() < deadline:
        state = await ping(client, base_url)
        if not state.get("sessions") and not state.get("queued") and not state.get("running"):
            return True
        await asyncio.sleep(0.05)
    return False


# --------------------------------------------------------------------------------------------
# One scenario run
