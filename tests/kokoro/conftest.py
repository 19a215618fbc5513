"""Fixtures for the Kokoro container's tests: a tiny model built now, and the real server.

The server runs as `python -m kokoro_server serve` in a subprocess on 127.0.0.1, exactly as the
container starts it, and is shared by the session (importing torch costs ~15 s on these cores).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/invocations-bidirectional-stream"

    def ping(self) -> dict:
        return httpx.get(f"{self.http}/ping", timeout=5).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def wait_idle(self, *, attempts: int = 100) -> dict:
        """Poll /ping until no session, job or model run is left (bounded)."""
        status: dict = {}
        for _ in range(attempts):
            status = self.ping()
            if status["sessions"] == 0 and status["queued"] == 0 and status["running"] == 0:
                return status
            time.sleep(0.1)
        return status


def start_server(model_dir: Path, log: Path, *, env: dict[str, str] | None = None, timeout: float = 180) -> Server:
    port = free_port()
    handle = log.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "kokoro_server", "serve", "--model-dir", str(model_dir),
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2).status_code == 200:
                return Server(process=process, port=port, log=log)
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    process.kill()
    raise RuntimeError(f"server did not answer /ping within {timeout}s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kokoro_server.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tiny_model, tmp_path_factory.mktemp("server") / "server.log")
    yield running
    running.stop()
