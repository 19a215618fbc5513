"""Every command's --help, and --region/--profile resolution (profile files written to tmp)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import typer
from clitest_support import create_stack
from typer.testing import CliRunner

from cli import deploy_agent, deploy_tts

if TYPE_CHECKING:
    from conftest import AwsEnv  # the fixtures' types

runner = CliRunner()
COMMANDS = [
    (app, name)
    for app, names in ((deploy_tts.app, ("deploy", "diff", "status", "teardown")),
                       (deploy_agent.app, ("deploy", "diff", "status", "teardown")))
    for name in names
]


@pytest.mark.parametrize(("app", "command"), COMMANDS, ids=[f"{a.info.name}-{c}" for a, c in COMMANDS])
def test_every_command_has_help_with_region_and_profile(
    app: typer.Typer, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "--region" in result.stdout and "--profile" in result.stdout


@pytest.mark.parametrize("app", [deploy_tts.app, deploy_agent.app])
def test_top_level_help_lists_commands(app: typer.Typer) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("deploy", "diff", "status", "teardown"):
        assert command in result.stdout


def test_tts_deploy_help_lists_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    text = runner.invoke(deploy_tts.app, ["deploy", "--help"]).stdout
    for flag in ("--instance-type", "--engine", "--endpoint-name", "--min-instances", "--max-instances",
                 "--model-dir", "--yes"):
        assert flag in text


@pytest.fixture
def profile_files(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A 'kokoro' profile in eu-west-1; no credentials or region in the environment."""
    config, creds = tmp_path / "aws-config", tmp_path / "aws-credentials"
    config.write_text("[profile kokoro]\nregion = eu-west-1\n")
    creds.write_text("[kokoro]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    create_stack("KokoroTtsFoundation", outputs={"SageMakerRoleArn": "arn:aws:iam::123456789012:role/x"},
                 region="eu-west-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name)


def _status(*args: str) -> dict[str, Any]:
    result = runner.invoke(deploy_tts.app, ["status", "--json", *args])
    assert result.exit_code == 0, result.output
    status: dict[str, Any] = json.loads(result.stdout)
    return status


def test_profile_supplies_credentials_and_region(profile_files: None) -> None:
    report = _status("--profile", "kokoro")
    assert report["region"] == "eu-west-1"
    assert report["stacks"][0] == {
        **report["stacks"][0],
        "name": "KokoroTtsFoundation",
        "status": "CREATE_COMPLETE",
    }


def test_region_flag_overrides_the_profile(profile_files: None) -> None:
    report = _status("--profile", "kokoro", "--region", "us-west-2")
    assert report["region"] == "us-west-2"
    assert report["stacks"][0]["status"] == "NOT_DEPLOYED"  # the stack lives in eu-west-1


def test_without_profile_there_are_no_credentials(profile_files: None) -> None:
    result = runner.invoke(deploy_tts.app, ["status", "--region", "eu-west-1"])
    assert result.exit_code == 1
    assert "No usable AWS credentials found." in result.output and "Traceback" not in result.output


def test_unknown_profile_is_a_clear_error(profile_files: None) -> None:
    result = runner.invoke(deploy_agent.app, ["status", "--profile", "nope"])
    assert result.exit_code == 1
    assert "AWS profile 'nope' not found." in result.output


def test_missing_region_is_a_clear_error(profile_files: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "empty-config"))
    result = runner.invoke(deploy_tts.app, ["teardown", "--yes", "--profile", "kokoro"])
    assert result.exit_code == 1
    assert "No AWS region set." in result.output and "--region" in result.output


def test_unreachable_aws_is_a_clear_error(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    result = runner.invoke(deploy_tts.app, ["status"])
    assert result.exit_code == 1
    assert "Could not reach http://127.0.0.1:9" in result.output and "Traceback" not in result.output
