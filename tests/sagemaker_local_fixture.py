"""The SageMaker runtime stand-in (``make sagemaker-local``) in front of the REAL tiny-model Kokoro server.

Started once per test session as a subprocess, exactly as the Makefile starts it, with fixed test
credentials. ``client_env`` is what a client needs to reach it through the real SDKs: the endpoint
URL in ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``, the test CA in ``AWS_CA_BUNDLE``, the credentials.

Use: ``from sagemaker_local_fixture import sagemaker_local`` together with ``kokoro_server``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kokoro_server_fixture import REPO, KokoroServer

ACCESS_KEY_ID = "AKIASTANDINTEST00001"
SECRET_ACCESS_KEY = "stand-in-secret-key-for-tests-only"
REGION = "us-east-1"
ENDPOINT_NAME = "kokoro-tts"
START_TIMEOUT_S = 60.0


@dataclass(frozen=True, kw_only=True)
class SageMakerLocal:
    endpoint_url: str
    endpoint_name: str
    region: str
    ca_bundle: str
    output: list[str] = field(default_factory=list, compare=False)

    def client_env(self, *, secret: str = SECRET_ACCESS_KEY) -> dict[str, str]:
        """Environment for a client process (or ``monkeypatch``) that reaches the stand-in."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": self.endpoint_url,
            "AWS_CA_BUNDLE": self.ca_bundle, "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }


def start_standin(container_url: str, *, state_dir: Path) -> tuple[subprocess.Popen[str], SageMakerLocal]:
    """Start ``python -m standins.sagemaker_runtime`` and read its ready lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
                "AWS_REGION": REGION, "SM_PORT": "0", "PYTHONUNBUFFERED": "1"})
    process = subprocess.Popen(
        [sys.executable, "-m", "standins.sagemaker_runtime", "--container-url", container_url,
         "--endpoint-name", ENDPOINT_NAME, "--state-dir", str(state_dir)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip())
            lines.put(line.rstrip())
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    values: dict[str, str] = {}
    deadline = time.monotonic() + START_TIMEOUT_S
    while "ca_bundle" not in values:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            stop_standin(process)
            pytest.fail("the stand-in did not print its ready lines:\n" + "\n".join(output[-40:]))
        key, sep, value = line.partition("=")
        if sep and key in ("endpoint_url", "endpoint_name", "region", "ca_bundle"):
            values[key] = value
    return process, SageMakerLocal(**values, output=output)


def stop_standin(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def sagemaker_local(kokoro_server: KokoroServer) -> Iterator[SageMakerLocal]:
    """The stand-in in front of the shared tiny-model Kokoro server."""
    with tempfile.TemporaryDirectory(prefix="sagemaker-local-") as state:
        process, standin = start_standin(kokoro_server.url, state_dir=Path(state))
        try:
            yield standin
        finally:
            stop_standin(process)
