"""Start ``python -m kokoro_server serve`` as a child process and wait until /ping answers.

One launcher for every place that needs a real server on this machine (tests in both
environments, the benchmarks, the soak, the agent demo), so they all start it the way the
container does. Standard library only: the Kokoro environment and the tooling one both have it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

# Variables that would override the command line's model directory, port or device.
_DROPPED_ENV = ("KOKORO_MODEL_DIR", "KOKORO_HOST", "PORT")


class LaunchError(RuntimeError):
    """The server exited or did not answer /ping in time; the message ends with its log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def get_json(url: str, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """GET ``url`` and parse its JSON body (for /ping)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return dict(json.loads(response.read()))


def build_tiny_model(target: Path, *, python: str | Path = sys.executable, timeout_s: float = 600) -> Path:
    """Write the tiny random-weight model with ``python -m kokoro_tools.tiny_model``."""
    built = subprocess.run([str(python), "-m", "kokoro_tools.tiny_model", str(target)],
                           capture_output=True, timeout=timeout_s, check=False)
    if built.returncode != 0:
        raise LaunchError(f"building the tiny model failed:\n{built.stderr.decode(errors='replace')[-3000:]}")
    return target


class KokoroProcess:
    """One server child process; ``start`` blocks until it answers, ``stop`` ends it."""

    def __init__(self, *, model_dir: Path, python: str | Path = sys.executable, log_path: Path | None = None,
                 host: str = "127.0.0.1", port: int = 0, env: Mapping[str, str] | None = None,
                 stop_signal: int = signal.SIGTERM, module: str = "kokoro_server") -> None:
        self.module = module  # what ``python -m`` runs: the server, or a bench harness around it
        self.model_dir = Path(model_dir)
        self.python = str(python)
        self.log_path = log_path
        self.host = host
        self.port = port
        self.env = dict(env or {})
        self.stop_signal = stop_signal
        self.process: subprocess.Popen[bytes] | None = None
        self.started_s = 0.0  # seconds from spawn to the first answer from /ping

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}/invocations-bidirectional-stream"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise LaunchError("the server is not running")
        return self.process.pid

    def ping(self, *, timeout_s: float = 5.0) -> dict[str, Any]:
        return get_json(f"{self.url}/ping", timeout_s=timeout_s)

    def diagnostics(self, *, timeout_s: float = 5.0) -> dict[str, Any]:
        """``/ping``'s state and the server's diagnostics (tasks, memory held, decoder cost)."""
        return get_json(f"{self.url}/diagnostics", timeout_s=timeout_s)

    def start(self, *, timeout_s: float = 240.0) -> dict[str, Any]:
        """Spawn the server and return its first /ping answer. Raises LaunchError with the log's tail."""
        self.port = self.port or free_port(self.host)
        env = {key: value for key, value in os.environ.items() if key not in _DROPPED_ENV}
        env.update({"PYTHONUNBUFFERED": "1", **self.env})
        command = [self.python, "-m", self.module, "serve", "--model-dir", str(self.model_dir),
                   "--host", self.host, "--port", str(self.port)]
        began = time.monotonic()
        # A session of its own: a terminal's Ctrl-C reaches whoever started it, which stops it with
        # one ``stop_signal`` (a second SIGINT mid-shutdown makes uvicorn print a traceback).
        if self.log_path is None:
            self.process = subprocess.Popen(command, env=env, start_new_session=True)
        else:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("wb") as log:
                self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)
        while True:
            if self.process.poll() is not None:
                raise LaunchError(f"the Kokoro server exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                status = self.ping(timeout_s=2.0)
                self.started_s = time.monotonic() - began
                return status
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() - began > timeout_s:
                tail = self.log_tail()
                self.stop()
                raise LaunchError(f"the Kokoro server did not answer /ping within {timeout_s:.0f} s:\n{tail}")
            time.sleep(0.25)

    def stop(self, *, timeout_s: float = 15.0) -> None:
        """Ask the server to shut down; kill it if it has not within ``timeout_s``."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(self.stop_signal)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout_s)

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> KokoroProcess:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
