"""The REAL Kokoro server for tooling-environment tests, started once per test session.

The server needs torch, so it runs from the Kokoro environment (.venv-kokoro, or $KOKORO_PYTHON)
as a subprocess, exactly as `make serve` starts it, on a tiny random-weight model built here.
Several test modules import the fixture; they share one server (reference-counted), because
importing torch costs 15-25 s on two cores.

Use: ``from kokoro_server_fixture import kokoro_server`` (after putting tests/ on sys.path).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 120.0
BUILD_TIMEOUT_S = 180.0


@dataclass(frozen=True, kw_only=True)
class KokoroServer:
    """A running server: its base URL and where its log goes."""

    url: str
    port: int
    log: Path
    model_dir: Path

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/invocations-bidirectional-stream"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def kokoro_python() -> Path:
    return Path(os.environ.get("KOKORO_PYTHON") or REPO / ".venv-kokoro" / "bin" / "python")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


class _Shared:
    server: KokoroServer | None = None
    process: subprocess.Popen[bytes] | None = None
    workdir: Path | None = None
    users = 0


def _start() -> KokoroServer:
    python = kokoro_python()
    if not python.exists():
        pytest.skip(f"the Kokoro environment is missing ({python}); run `make install`")
    workdir = Path(tempfile.mkdtemp(prefix="kokoro-fixture-"))
    _Shared.workdir = workdir
    model_dir = workdir / "model"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "KOKORO_DEVICE": "cpu"}
    for name in ("KOKORO_MODEL_DIR", "KOKORO_DEFAULT_VOICE", "KOKORO_ENGINE", "PORT"):
        env.pop(name, None)
    build = subprocess.run(
        [str(python), "-m", "kokoro_server.tiny_model", str(model_dir)],
        cwd=REPO, env=env, capture_output=True, timeout=BUILD_TIMEOUT_S, check=False,
    )
    if build.returncode != 0:
        pytest.fail(f"building the tiny model failed:\n{build.stderr.decode(errors='replace')[-4000:]}")
    port = _free_port()
    log = workdir / "server.log"
    server = KokoroServer(url=f"http://127.0.0.1:{port}", port=port, log=log, model_dir=model_dir)
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [str(python), "-m", "kokoro_server", "serve", "--model-dir", str(model_dir),
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
        )
    _Shared.process = process
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _ping(server.url):
        if process.poll() is not None:
            _stop()
            pytest.fail(f"the Kokoro server exited with {process.returncode}:\n{server.log_tail()}")
        if time.monotonic() > deadline:
            tail = server.log_tail()
            _stop()
            pytest.fail(f"the Kokoro server did not answer /ping within {START_TIMEOUT_S:.0f} s:\n{tail}")
        time.sleep(0.25)
    return server


def _stop() -> None:
    process, _Shared.process = _Shared.process, None
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    if _Shared.workdir is not None:
        shutil.rmtree(_Shared.workdir, ignore_errors=True)
        _Shared.workdir = None
    _Shared.server = None


@pytest.fixture(scope="session")
def kokoro_server() -> Iterator[KokoroServer]:
    """The base URL etc. of one real server shared by every module that uses this fixture."""
    if _Shared.server is None:
        _Shared.server = _start()
    _Shared.users += 1
    try:
        yield _Shared.server
    finally:
        _Shared.users -= 1
        if _Shared.users == 0:
            _stop()
