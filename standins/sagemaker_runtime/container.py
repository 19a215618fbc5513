"""Start the Kokoro server as SageMaker would run the container: ``serve``, /ping before traffic."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

READY_TIMEOUT_S = 180.0


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ContainerProcess:
    """One Kokoro server subprocess in its own environment (torch lives there, not here)."""

    def __init__(self, *, python: Path, model_dir: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        if not python.exists():
            raise RuntimeError(f"kokoro_python: {python} not found; run `make install`")
        if not model_dir.is_dir():
            raise RuntimeError(f"model_dir: {model_dir} is not a directory (make local-model / make tiny-model)")
        self._python, self._model_dir, self._host, self._port = python, model_dir, host, port
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start it and wait for /ping; the container's base URL."""
        port = self._port or free_port(self._host)
        url = f"http://{self._host}:{port}"
        env = {k: v for k, v in os.environ.items() if k not in ("KOKORO_MODEL_DIR", "PORT")}
        self._process = subprocess.Popen(
            [str(self._python), "-m", "kokoro_server", "serve", "--model-dir", str(self._model_dir),
             "--host", self._host, "--port", str(port)], env=env, start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the Kokoro server exited with {self._process.returncode} before /ping answered")
            try:
                with urllib.request.urlopen(f"{url}/ping", timeout=2) as response:
                    if response.status == 200:
                        return url
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Kokoro server did not answer {url}/ping within {READY_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
