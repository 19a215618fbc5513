"""`deploy-tts say --endpoint-url` through the SageMaker stand-in (real SDK / boto3) to the REAL tiny-model server."""

from __future__ import annotations

import wave
from pathlib import Path

import pytest
from sagemaker_local_fixture import SageMakerLocal
from typer.testing import CliRunner

from cli import deploy_tts

runner = CliRunner()


@pytest.fixture
def standin_env(sagemaker_local: SageMakerLocal, monkeypatch: pytest.MonkeyPatch) -> SageMakerLocal:
    """Credentials, region and CA from the environment; the URL only from --endpoint-url."""
    for name, value in sagemaker_local.client_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return sagemaker_local


@pytest.mark.parametrize("mode", ["bidi", "stream"])
def test_say_through_the_stand_in_writes_the_same_audio_as_the_server(
    standin_env: SageMakerLocal, tmp_path: Path, mode: str
) -> None:
    local, remote = tmp_path / "local.wav", tmp_path / "remote.wav"
    direct = runner.invoke(deploy_tts.app, ["say", "Hello there.", "--url", standin_env.container_url,
                                            "--mode", mode, "--out", str(local)])
    assert direct.exit_code == 0, direct.output
    result = runner.invoke(deploy_tts.app, ["say", "Hello there.", "--endpoint-url", standin_env.endpoint_url,
                                            "--endpoint-name", standin_env.endpoint_name, "--mode", mode,
                                            "--out", str(remote)])
    assert result.exit_code == 0, result.output
    with wave.open(str(local), "rb") as a, wave.open(str(remote), "rb") as b:
        assert a.getnframes() == b.getnframes() > 0  # the model is deterministic: same length either way
    assert "time to first audio" in result.stdout


def test_wrong_secret_through_the_stand_in_is_one_clear_line(
    standin_env: SageMakerLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    result = runner.invoke(deploy_tts.app, ["say", "Hi.", "--endpoint-url", standin_env.endpoint_url])
    assert result.exit_code == 1
    assert result.output.startswith("Error:") and "refused the AWS credentials" in result.output

