"""The stand-in's settings: each bad value is refused with a message naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from standins.sagemaker_runtime.settings import SettingsError, StandInSettings

REPO = Path(__file__).resolve().parents[2]
GOOD = {"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"}


def settings(env: dict[str, str], **overrides: object) -> StandInSettings:
    return StandInSettings.from_env(env, **{"endpoint_name": "kokoro-tts", "container_url": "http://127.0.0.1:8080",
                                            **overrides})


def test_good_settings_and_the_documented_container_path() -> None:
    got = settings({**GOOD, "SM_PORT": "8443"})
    assert got.port == 8443 and got.region == "us-east-1"
    assert got.container_ws_url == "ws://127.0.0.1:8080/invocations-bidirectional-stream"


@pytest.mark.parametrize(("env", "overrides", "named"), [
    ({}, {}, "AWS_ACCESS_KEY_ID"),
    ({**GOOD, "SM_PORT": "eighty"}, {}, "SM_PORT"),
    ({**GOOD, "SM_PORT": "70000"}, {}, "SM_PORT"),
    (GOOD, {"endpoint_name": "bad_name!"}, "endpoint_name"),
    (GOOD, {"container_url": "ftp://x"}, "container_url"),
    ({**GOOD, "AWS_REGION": "moon"}, {}, "region"),
])
def test_bad_settings_name_the_field(env: dict[str, str], overrides: dict[str, object], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        settings(env, **overrides)


def test_the_command_without_credentials_exits_with_one_clear_line() -> None:
    env = {"PATH": "/usr/bin:/bin", "SM_PORT": "0"}
    proc = subprocess.run([sys.executable, "-m", "standins.sagemaker_runtime", "--container-url",
                           "http://127.0.0.1:9"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("sagemaker-local: AWS_ACCESS_KEY_ID")
