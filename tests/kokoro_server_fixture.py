"""The REAL Kokoro server for tooling-environment tests, started once per test session.

The server needs torch, so it runs from the Kokoro environment (.venv-kokoro, or $KOKORO_PYTHON)
as a subprocess, exactly as `make serve` starts it, on a tiny random-weight model built here.
Several test modules import the fixture; they share one server (reference-counted), because
importing torch costs 15-25 s on two cores.

tests/conftest.py registers the fixture for every test directory; KokoroServer is imported by name
(pytest's ``pythonpath`` puts tests/ on the path).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from voicestream.launch import KokoroProcess, LaunchError, build_tiny_model

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


class _Shared:
    server: KokoroServer | None = None
    process: KokoroProcess | None = None
    workdir: Path | None = None
    users = 0


def _start() -> KokoroServer:
    python = kokoro_python()
    if not python.exists():
        pytest.fail(f"the Kokoro environment is missing ({python}); run `make install`")
    workdir = Path(tempfile.mkdtemp(prefix="kokoro-fixture-"))
    _Shared.workdir = workdir
    log = workdir / "server.log"
    process = KokoroProcess(model_dir=workdir / "model", python=python, log_path=log,
                            env={"KOKORO_DEVICE": "cpu", "KOKORO_DEFAULT_VOICE": "", "KOKORO_ENGINE": ""})
    _Shared.process = process
    try:
        build_tiny_model(process.model_dir, python=python, timeout_s=BUILD_TIMEOUT_S)
        process.start(timeout_s=START_TIMEOUT_S)
    except LaunchError as error:
        _stop()
        pytest.fail(str(error))
    return KokoroServer(url=process.url, port=process.port, log=log, model_dir=process.model_dir)


def _stop() -> None:
    process, _Shared.process = _Shared.process, None
    if process is not None:
        process.stop(timeout_s=10)
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


@pytest.fixture()
def stopping_server(kokoro_server: KokoroServer, tmp_path: Path) -> Iterator[KokoroProcess]:
    """A second server on the shared server's tiny model, for a test to stop (SIGTERM) mid-turn while
    the shared one keeps serving: a redeploy on one machine."""
    process = KokoroProcess(model_dir=kokoro_server.model_dir, python=kokoro_python(),
                            log_path=tmp_path / "stopping-server.log",
                            env={"KOKORO_DEVICE": "cpu", "KOKORO_WARMUP": "0"})
    try:
        process.start(timeout_s=START_TIMEOUT_S)
    except LaunchError as error:
        pytest.fail(str(error))
    yield process
    process.stop(timeout_s=10)

