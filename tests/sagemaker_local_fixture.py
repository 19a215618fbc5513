"""The SageMaker runtime stand-in (``make sagemaker-local``) in front of the REAL tiny-model Kokoro server.

Started once per test session as a subprocess, as the Makefile starts it, with fixed test
credentials. ``client_env`` is what a client needs to reach it through the real SDKs: the endpoint
URL in ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``, the test CA in ``AWS_CA_BUNDLE``, the credentials.

Use: ``from sagemaker_local_fixture import sagemaker_local`` together with ``kokoro_server``.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import pytest
from kokoro_server_fixture import REPO, KokoroServer

from standins.sagemaker_runtime.launch import StandInInfo, StandInProcess

_EXCEPTION_LINE = re.compile(r"^[\s|+]*[\w.]+(Error|Exception)\b.*")
ACCESS_KEY_ID = "STANDINTESTKEYID"
SECRET_ACCESS_KEY = "stand-in-secret-key-for-tests-only"


class PluginOptions(TypedDict):
    """The SageMaker keyword arguments the LiveKit and pipecat plugins share."""

    endpoint_name: str
    region: str
    endpoint_url: str
    ca_bundle: str
    aws_access_key_id: str
    aws_secret_access_key: str


class SageMakerLocal(StandInInfo):
    """The running stand-in, and the environment its clients need."""

    def client_env(self, *, secret: str = SECRET_ACCESS_KEY) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": self.endpoint_url,
            "AWS_CA_BUNDLE": self.ca_bundle, "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def plugin_options(self, monkeypatch: pytest.MonkeyPatch) -> PluginOptions:
        """The stand-in's endpoint, CA and keys as a plugin's keyword arguments, with none of them
        in the environment (so only the arguments can reach it)."""
        for key in ("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE", "AWS_ACCESS_KEY_ID",
                    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        return {"endpoint_name": self.endpoint_name, "region": self.region, "endpoint_url": self.endpoint_url,
                "ca_bundle": self.ca_bundle, "aws_access_key_id": ACCESS_KEY_ID,
                "aws_secret_access_key": SECRET_ACCESS_KEY}


@pytest.fixture(scope="session")
def sagemaker_local(kokoro_server: KokoroServer) -> Iterator[SageMakerLocal]:
    """The stand-in in front of the shared tiny-model Kokoro server."""
    with tempfile.TemporaryDirectory(prefix="sagemaker-local-") as state:
        process = StandInProcess(container_url=kokoro_server.url, state_dir=Path(state), cwd=REPO,
                                 access_key_id=ACCESS_KEY_ID, secret_access_key=SECRET_ACCESS_KEY)
        try:
            info = process.start()
        except RuntimeError as exc:
            pytest.fail(str(exc))
        try:
            yield SageMakerLocal(**{k: getattr(info, k) for k in (
                "endpoint_url", "endpoint_name", "region", "ca_bundle", "container_url", "output")})
        finally:
            process.stop()
        # Any exception the stand-in logged fails the session (hypercorn's KeyError on late DATA tore
        # connections down). asyncio's TLS shutdown racing a client's last bytes when the stand-in
        # stops (APPLICATION_DATA_AFTER_CLOSE_NOTIFY) is not a fault of the relay.
        raised = [line for line in info.output if _EXCEPTION_LINE.match(line)]
        errors = [line for line in raised if "APPLICATION_DATA_AFTER_CLOSE_NOTIFY" not in line]
        assert not errors, "the stand-in logged errors:\n" + "\n".join(info.output[-80:])
