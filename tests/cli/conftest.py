"""One moto_server per session; every test gets a reset server and an isolated AWS environment."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import pytest
from agent_harness import browser  # noqa: F401 (a pytest fixture: headless Chromium)
from waiting import wait_until

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

_AWS_VARS = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "CDK_DOCKER",
    "HF_TOKEN",
)


def _moto_server() -> str:
    for candidate in (REPO / ".venv" / "bin" / "moto_server", Path(sys.executable).parent / "moto_server"):
        if candidate.exists():
            return str(candidate)
    found = shutil.which("moto_server")
    if not found:
        pytest.fail("moto_server not installed (make install puts moto[server] in .venv)")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [_moto_server(), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited ({proc.returncode}) before answering on {url}")
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            return False

    try:
        if not wait_until(answers, timeout=60):
            raise RuntimeError(f"moto_server did not start on {url}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class AwsEnv:
    url: str
    tmp: Path


@pytest.fixture
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AwsEnv:
    """A clean moto and env vars pointing boto3 (in-process and in subprocesses) at it."""
    request = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass
    for name in list(os.environ):
        if name in _AWS_VARS or name.startswith("AWS_ENDPOINT_URL"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    return AwsEnv(url=moto_url, tmp=tmp_path)


class CdkCall(TypedDict):
    """One line of the fake CDK CLI's log (clitest_fake_cdk.py)."""

    argv: list[str]
    cwd: str
    region: str | None


@dataclass(frozen=True)
class FakeTools:
    bin: Path
    log: Path

    def calls(self) -> list[CdkCall]:
        import json

        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


DOCKER_WITH_QEMU = (
    'if [ "$1" = buildx ]; then printf "Name: default\\nDriver: docker\\n'
    'Platforms: ${FAKE_BUILDX_PLATFORMS-linux/amd64, linux/amd64/v2, linux/arm64, linux/arm/v7}\\n"; exit 0; fi\n'
    'echo "27.3.1"\n'
)
"""`docker info` answers; `docker buildx inspect` lists FAKE_BUILDX_PLATFORMS (default: QEMU set up)."""


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def fake_tools(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    """PATH holding only stand-ins: node, docker (engine up), and `npx` running the fake CDK CLI.

    Tests delete or replace a tool here to simulate it missing or broken. The CDK app dir is a
    temp dir with a cdk.json, so nothing depends on infra/ being written yet.
    """
    bin_dir = aws.tmp / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "node", "echo v20.11.1\n")
    _script(bin_dir / "docker", DOCKER_WITH_QEMU)
    _script(
        bin_dir / "npx",
        f'exec "{sys.executable}" "{HERE / "clitest_fake_cdk.py"}" "$@"\n',
    )
    app_dir = aws.tmp / "app"
    app_dir.mkdir()
    (app_dir / "cdk.json").write_text('{"app": "python3 app.py"}\n')
    log = aws.tmp / "cdk-calls.jsonl"
    monkeypatch.setenv("FAKE_CDK_REAL_PATH", os.environ.get("PATH", ""))  # jsii's node, for a real synth
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("KOKORO_CDK_APP_DIR", str(app_dir))
    monkeypatch.setenv("FAKE_CDK_LOG", str(log))
    return FakeTools(bin=bin_dir, log=log)
