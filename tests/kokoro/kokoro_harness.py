"""Helpers the Kokoro container's tests share: a real server started the way the container starts
it (voicestream.launch), with the test-side views they need. Imported by name (pytest's
``pythonpath`` puts this folder on the path), not through conftest."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from waiting import wait_until

from voicestream.launch import KokoroProcess, free_port

__all__ = ["Server", "free_port", "start_server"]


class Server(KokoroProcess):
    """A running ``python -m kokoro_server serve``; ``log`` is where its output goes."""

    @property
    def log(self) -> Path:
        assert self.log_path is not None
        return self.log_path

    @property
    def http(self) -> str:
        return self.url

    @property
    def ws(self) -> str:
        return self.ws_url

    def wait_idle(self, *, attempts: int = 100) -> dict[str, Any]:
        """Poll /diagnostics until no session, job or model run is left (bounded); its last answer."""
        return wait_until(self.diagnostics, until=_idle, timeout=attempts * 0.1)

    def open_fds(self) -> int:
        """File descriptors the server process holds now (``/proc/<pid>/fd``)."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def idle_fds(self, *, quiet_s: float = 0.5) -> int:
        """The server's descriptor count at rest: the fewest seen over ``quiet_s`` with no request in
        flight. A count taken right after a /ping can include that ping's socket, which the server
        closes a moment after the client has read the answer."""
        fewest = self.open_fds()
        deadline = time.monotonic() + quiet_s
        while time.monotonic() < deadline:
            time.sleep(0.02)
            fewest = min(fewest, self.open_fds())
        return fewest

    def fds_down_to(self, limit: int, *, timeout_s: float = 30.0) -> int:
        """Poll (without a request of our own, which would open a socket) until the server holds at most
        ``limit`` descriptors or ``timeout_s`` passes; return the last count."""
        return wait_until(self.open_fds, until=lambda count: count <= limit, timeout=timeout_s, interval=0.05)


def _idle(status: dict[str, Any]) -> bool:
    return bool(status["sessions"] == 0 and status["queued"] == 0 and status["running"] == 0)


def start_server(model_dir: Path, log: Path, *, env: dict[str, str] | None = None, timeout: float = 180) -> Server:
    server = Server(model_dir=model_dir, python=sys.executable, log_path=log, env=env)
    server.start(timeout_s=timeout)
    return server
