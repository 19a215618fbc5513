"""`deploy` and `diff`: preflight failures, the full deploy flow (fake CDK CLI on PATH), exit codes.

The CDK CLI, node and docker are stand-ins on PATH (see conftest.fake_tools); every AWS call
is real boto3 against moto_server.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from clitest_support import (
    CACHE_BUCKET,
    REVISION,
    deploy_endpoint,
    deploy_foundation,
    make_model_dir,
    put_bootstrap_param,
    session,
)
from typer.testing import CliRunner, Result

from cli import deploy_agent, deploy_tts

if TYPE_CHECKING:
    from conftest import AwsEnv, FakeTools  # the fixtures' types

runner = CliRunner()
TTS_ARGS = ["deploy", "--yes", "--instance-type", "ml.m5.xlarge", "--wait-timeout", "30"]


def _assert_clean_failure(result: Result, *texts: str) -> None:
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    for text in texts:
        assert text in result.output, result.output


def test_deploy_without_credentials_fails_cleanly(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = runner.invoke(deploy_tts.app, [*TTS_ARGS, "--model-dir", str(make_model_dir(tmp_path / "m"))])
    _assert_clean_failure(result, "Credential check failed: No usable AWS credentials found.", "aws configure")
    assert fake_tools.calls() == []
    agent = runner.invoke(deploy_agent.app, ["deploy", "--yes"])
    _assert_clean_failure(agent, "No usable AWS credentials found.")


def test_deploy_without_docker_explains(aws: AwsEnv, fake_tools: FakeTools, tmp_path: Path) -> None:
    put_bootstrap_param()
    (fake_tools.bin / "docker").unlink()
    result = runner.invoke(deploy_tts.app, [*TTS_ARGS, "--model-dir", str(make_model_dir(tmp_path / "m"))])
    _assert_clean_failure(result, "docker not found on PATH", "Install Docker", "Preflight failed: docker")
    assert fake_tools.calls() == []  # nothing long started


def test_deploy_with_docker_engine_down_explains(aws: AwsEnv, fake_tools: FakeTools, tmp_path: Path) -> None:
    put_bootstrap_param()
    (fake_tools.bin / "docker").write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n"
    )
    result = runner.invoke(deploy_tts.app, [*TTS_ARGS, "--model-dir", str(make_model_dir(tmp_path / "m"))])
    _assert_clean_failure(result, "Docker engine not reachable", "Cannot connect to the Docker daemon", "docker info")


def test_deploy_reports_every_missing_piece(aws: AwsEnv, fake_tools: FakeTools, tmp_path: Path) -> None:
    for tool in ("node", "npx", "docker"):
        (fake_tools.bin / tool).unlink()
    result = runner.invoke(deploy_tts.app, [*TTS_ARGS, "--model-dir", str(tmp_path / "nope")])
    _assert_clean_failure(
        result,
        "not bootstrapped",
        "bootstrap aws://123456789012/us-east-1",
        "node not found on PATH",
        "Neither npx nor a recent `cdk`",
        "does not exist",
        "Preflight failed: CDK bootstrap, model source, node, cdk, docker",
    )


def test_deploy_tts_end_to_end(aws: AwsEnv, fake_tools: FakeTools, tmp_path: Path) -> None:
    put_bootstrap_param()
    model = make_model_dir(tmp_path / "model")
    result = runner.invoke(deploy_tts.app, [*TTS_ARGS, "--model-dir", str(model), "--engine", "onnx",
                                            "--max-instances", "2", "--alarm-email", "ops@example.com"])
    assert result.exit_code == 0, result.output
    calls = fake_tools.calls()
    deployed = [c["argv"][c["argv"].index("deploy") + 1] for c in calls if "deploy" in c["argv"]]
    assert deployed == ["KokoroTtsFoundation", "KokoroTtsModelCache", "KokoroTtsEndpoint"]
    # Only the endpoint stack adopts what exists already (the log group SageMaker may have made).
    assert ["--import-existing-resources" in c["argv"] for c in calls] == [False, False, True]
    assert "instance quota" in result.output  # checked before any CloudFormation (moto: not checked)
    argv = calls[-1]["argv"]
    assert argv[:2] == ["--yes", "aws-cdk@2.1148.0"]
    assert argv[3:6] == ["KokoroTtsEndpoint", "--require-approval", "never"]
    for pair in (
        "instanceType=ml.m5.xlarge",
        "engine=onnx",
        "endpointName=kokoro-tts",
        "maxInstances=2",
        f"modelRevision={REVISION}",
        "alarmEmail=ops@example.com",
    ):
        assert argv[argv.index(pair) - 1] == "-c"
    assert argv[argv.index("minInstances=1") - 1] == "-c"  # no flag, nothing deployed: cdk.json's
    assert {c["region"] for c in calls} == {"us-east-1"}
    keys = {o["Key"] for o in session().client("s3").list_objects_v2(Bucket=CACHE_BUCKET)["Contents"]}
    assert f"models/kokoro-82m/{REVISION}/manifest.json" in keys
    assert "4 copied, 0 already present" in result.output
    assert "Endpoint kokoro-tts is InService" in result.stdout
    assert "Next: deploy-tts status" in result.stdout
    again = runner.invoke(deploy_tts.app, [*TTS_ARGS, "--model-dir", str(model)])
    assert again.exit_code == 0 and "0 copied, 4 already present" in again.output


def test_deploy_stops_at_the_failing_stack(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    put_bootstrap_param()
    monkeypatch.setenv("FAKE_CDK_FAIL", "KokoroTtsModelCache")
    result = runner.invoke(deploy_tts.app, [*TTS_ARGS, "--model-dir", str(make_model_dir(tmp_path / "m"))])
    _assert_clean_failure(result, "cdk deploy KokoroTtsModelCache failed (exit code 1)")
    assert len(fake_tools.calls()) == 2


def test_deploy_asks_before_deploying(aws: AwsEnv, fake_tools: FakeTools, tmp_path: Path) -> None:
    put_bootstrap_param()
    args = [a for a in TTS_ARGS if a != "--yes"]
    result = runner.invoke(deploy_tts.app, [*args, "--model-dir", str(make_model_dir(tmp_path / "m"))], input="n\n")
    _assert_clean_failure(result, "Aborted: nothing was deployed")
    assert fake_tools.calls() == []


def test_deploy_rejects_inconsistent_options(aws: AwsEnv) -> None:
    result = runner.invoke(deploy_tts.app, ["deploy", "--min-instances", "3", "--max-instances", "1"])
    _assert_clean_failure(result, "--min-instances 3: minInstances (3) is greater than maxInstances (1).")
    bad = runner.invoke(deploy_tts.app, ["deploy", "--instance-type", "g5.xlarge"])
    _assert_clean_failure(bad, "--instance-type g5.xlarge: 'g5.xlarge' is invalid")


def test_min_instances_zero_is_refused_before_anything(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Synthesis refuses 0; the CLI says so before the credential check, the plan and the prompt."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")  # had it reached AWS, the error would be about credentials
    result = runner.invoke(deploy_tts.app, ["deploy", "--min-instances", "0"], input="y\n")
    _assert_clean_failure(result, "--min-instances 0: expected an integer >= 1, got 0.")
    assert "Continue?" not in result.output and "Credential" not in result.output
    assert len(result.output.strip().splitlines()) == 2  # the error and its hint
    assert fake_tools.calls() == []


def test_agent_deploy_needs_the_tts_stacks(aws: AwsEnv, fake_tools: FakeTools) -> None:
    put_bootstrap_param()
    result = runner.invoke(deploy_agent.app, ["deploy", "--yes"])
    _assert_clean_failure(result, "KokoroTtsFoundation is not deployed", "deploy-tts deploy")
    assert fake_tools.calls() == []


def test_agent_deploy_end_to_end(aws: AwsEnv, fake_tools: FakeTools) -> None:
    put_bootstrap_param()
    deploy_foundation()
    deploy_endpoint(name="kokoro-tts-e2e")
    result = runner.invoke(deploy_agent.app, ["deploy", "--yes", "--bedrock-model-id", "amazon.nova-lite-v1:0"])
    assert result.exit_code == 0, result.output
    argv = fake_tools.calls()[-1]["argv"]
    assert "KokoroAgentRuntime" in argv
    assert "endpointName=kokoro-tts-e2e" in argv and "bedrockModelId=amazon.nova-lite-v1:0" in argv
    assert "Agent runtime kokoro_voice_agent deployed" in result.stdout
    assert "Next: deploy-agent status" in result.stdout


def test_diff_passes_the_cdk_exit_code_through(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CDK_DIFF_EXIT", "3")
    result = runner.invoke(deploy_tts.app, ["diff", "--fail", "--engine", "onnx", "--instance-type", "ml.c5.xlarge"])
    assert result.exit_code == 3
    argv = fake_tools.calls()[-1]["argv"]
    assert argv[2:6] == ["diff", "KokoroTtsFoundation", "KokoroTtsModelCache", "KokoroTtsEndpoint"]
    assert "engine=onnx" in argv and "--fail" in argv
    assert "--no-change-set" in argv  # read-only: the lookup role, never the deploy role
    monkeypatch.setenv("FAKE_CDK_DIFF_EXIT", "0")
    agent = runner.invoke(deploy_agent.app, ["diff"])
    assert agent.exit_code == 0
    assert fake_tools.calls()[-1]["argv"][2:4] == ["diff", "KokoroAgentRuntime"]


def test_diff_deployed_uses_the_context_the_endpoint_was_deployed_with(aws: AwsEnv, fake_tools: FakeTools) -> None:
    """CI's diff: the Endpoint stack's DeployContext output, not cdk.json's defaults."""
    import json

    from clitest_support import create_stack

    deployed = {"instanceType": "ml.g5.2xlarge", "engine": "torch", "endpointName": "voice-prod",
                "minInstances": 2, "maxInstances": 4, "modelRevision": REVISION}
    create_stack("KokoroTtsEndpoint", resources={"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
                 outputs={"EndpointName": "voice-prod", "DeployContext": json.dumps(deployed)})
    result = runner.invoke(deploy_tts.app, ["diff", "--deployed"])
    assert result.exit_code == 0, result.output
    argv = fake_tools.calls()[-1]["argv"]
    for pair in ("instanceType=ml.g5.2xlarge", "endpointName=voice-prod", "minInstances=2", "maxInstances=4"):
        assert argv[argv.index(pair) - 1] == "-c"


def test_diff_without_node_explains(aws: AwsEnv, fake_tools: FakeTools) -> None:
    (fake_tools.bin / "node").unlink()
    _assert_clean_failure(runner.invoke(deploy_tts.app, ["diff"]), "node not found on PATH", "Node.js")
