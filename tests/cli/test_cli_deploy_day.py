"""Deploy-day defects (issue 15): instance-type changes under autoscaling, one Bedrock model id
for both CLIs, Bedrock model access and the arm64 builder in the preflight.

AWS calls are real boto3 against moto_server. moto has no UpdateEndpoint and its CloudFormation
skips Application Auto Scaling resources, so the fake CDK (clitest_fake_cdk.py) plays
CloudFormation: it registers scaling as the template says and, per AWS's endpoint-scaling-update
page, refuses to change the instance type of a variant that is still a scaling target. That rule
is our reading of AWS's documentation, enforced by our stand-in; the CLI's calls to Application
Auto Scaling (deregister; register and put policy after a failure) are real calls that moto records.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from botocore.stub import Stubber
from clitest_support import (
    DEFAULT_MODEL,
    agent_role_bedrock_grants,
    deploy_endpoint,
    deploy_foundation,
    endpoint_instance_type,
    foundation_model,
    make_model_dir,
    put_bootstrap_param,
    scaling_state,
)
from typer.testing import CliRunner, Result

from cli import deploy_agent, deploy_tts
from cli.aws import make_target
from cli.bedrock import check_model_access

if TYPE_CHECKING:
    from conftest import AwsEnv, FakeTools  # the fixtures' types

runner = CliRunner()
HERE = Path(__file__).resolve().parent
GPU_TYPE, CPU_TYPE = "ml.g4dn.xlarge", "ml.c5.xlarge"  # moto rejects ml.g5.* and ml.c7i.*
NOVA = "amazon.nova-lite-v1:0"
NOVA_ARN = f"arn:aws:bedrock:us-east-1::foundation-model/{NOVA}"


def _tts(model: Path, *args: str) -> Result:
    return runner.invoke(deploy_tts.app, ["deploy", "--yes", "--wait-timeout", "30", "--model-dir", str(model), *args])


def test_changing_the_instance_type_of_an_autoscaled_endpoint_succeeds(
    aws: AwsEnv, fake_tools: FakeTools, tmp_path: Path
) -> None:
    put_bootstrap_param()
    model = make_model_dir(tmp_path / "m")
    first = _tts(model, "--instance-type", GPU_TYPE)
    assert first.exit_code == 0, first.output
    targets, policies = scaling_state()
    assert len(targets) == 1 and policies == ["kokoro-tts-concurrent-requests-per-model"]

    # The README's switch to the CPU engine: another instance type on a deployed, autoscaled endpoint.
    switched = _tts(model, "--engine", "onnx", "--instance-type", CPU_TYPE)
    assert switched.exit_code == 0, switched.output
    assert endpoint_instance_type() == CPU_TYPE
    assert f"Instance type {GPU_TYPE} -> {CPU_TYPE}: autoscaling of kokoro-tts deregistered first" in switched.output
    targets, policies = scaling_state()
    assert [(t["MinCapacity"], t["MaxCapacity"]) for t in targets] == [(1, 2)]
    assert policies == ["kokoro-tts-concurrent-requests-per-model"]  # added back by the last deploy
    endpoint_deploys = [c["argv"] for c in fake_tools.calls() if "KokoroTtsEndpoint" in c["argv"]][-2:]
    assert "autoscaling=false" in endpoint_deploys[0] and "autoscaling=false" not in endpoint_deploys[1]

    same = _tts(model, "--engine", "onnx", "--instance-type", CPU_TYPE)  # no type change: nothing lifted
    assert same.exit_code == 0 and "deregistered" not in same.output


def test_the_stand_in_refuses_a_type_change_while_scaling_is_registered(aws: AwsEnv, fake_tools: FakeTools) -> None:
    """Without the CLI's deregistration the same deploy fails: the test above is not vacuous."""
    deploy_endpoint(instance_type=GPU_TYPE, autoscaling=True)
    fake = subprocess.run(
        [sys.executable, str(HERE / "clitest_fake_cdk.py"), "deploy", "KokoroTtsEndpoint",
         "-c", "endpointName=kokoro-tts", "-c", f"instanceType={CPU_TYPE}", "-c", "modelRevision=r"],
        capture_output=True, text=True, check=False)
    assert fake.returncode == 1 and "cannot change while its variant is a target for auto scaling" in fake.stderr
    assert endpoint_instance_type() == GPU_TYPE


def test_a_failed_type_change_restores_the_old_scaling(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    put_bootstrap_param()
    model = make_model_dir(tmp_path / "m")
    assert _tts(model, "--instance-type", GPU_TYPE).exit_code == 0
    monkeypatch.setenv("FAKE_CDK_FAIL", "KokoroTtsEndpoint")
    failed = _tts(model, "--engine", "onnx", "--instance-type", CPU_TYPE)
    assert failed.exit_code == 1 and "cdk deploy KokoroTtsEndpoint failed" in failed.output
    assert "Autoscaling restored as before: registered endpoint/kokoro-tts/variant/AllTraffic" in failed.output
    assert endpoint_instance_type() == GPU_TYPE
    targets, policies = scaling_state()
    assert len(targets) == 1 and policies == ["kokoro-tts-concurrent-requests-per-model"]


def test_a_tts_redeploy_keeps_the_model_the_agent_deploy_granted(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The foundation here is the real FoundationStack template (synthesized by the fake CDK from
    the context it is given) created in moto, so "granted" means the agent role's policy in IAM."""
    monkeypatch.setenv("FAKE_CDK_REAL_FOUNDATION", "1")
    put_bootstrap_param()
    model = make_model_dir(tmp_path / "m")
    assert _tts(model, "--instance-type", CPU_TYPE).exit_code == 0
    assert foundation_model() == DEFAULT_MODEL  # us-east-1: cdk.json's model as the "us." profile
    agent = runner.invoke(deploy_agent.app, ["deploy", "--yes", "--bedrock-model-id", NOVA])
    assert agent.exit_code == 0, agent.output
    assert agent_role_bedrock_grants() == {NOVA_ARN}
    again = _tts(model, "--instance-type", CPU_TYPE)
    assert again.exit_code == 0, again.output
    assert agent_role_bedrock_grants() == {NOVA_ARN}  # the grant survived the TTS redeploy
    assert f"bedrockModelId={NOVA}" in fake_tools.calls()[-1]["argv"]
    assert "kept from the deployed KokoroTtsFoundation" in again.output
    plain = runner.invoke(deploy_agent.app, ["deploy", "--yes"])  # no flag: the deployed model stays too
    assert plain.exit_code == 0 and f"bedrockModelId={NOVA}" in fake_tools.calls()[-1]["argv"]


def test_the_profile_prefix_must_match_the_region(aws: AwsEnv, fake_tools: FakeTools) -> None:
    wrong = runner.invoke(deploy_agent.app, ["deploy", "--yes", "--region", "eu-west-1",
                                             "--bedrock-model-id", DEFAULT_MODEL])
    assert wrong.exit_code == 1
    assert "cannot be called from eu-west-1; use 'eu.anthropic.claude-haiku-4-5-20251001-v1:0'" in wrong.output
    outside = runner.invoke(deploy_agent.app, ["deploy", "--yes", "--region", "sa-east-1"])
    assert outside.exit_code == 1 and "no cross-Region inference profile geography" in outside.output
    assert fake_tools.calls() == []


def test_preflight_reports_a_builder_without_arm64(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_bootstrap_param()
    deploy_foundation()
    deploy_endpoint(name="kokoro-tts")
    monkeypatch.setenv("FAKE_BUILDX_PLATFORMS", "linux/amd64, linux/amd64/v2, linux/386")
    result = runner.invoke(deploy_agent.app, ["deploy", "--yes"])
    assert result.exit_code == 1
    assert "cannot build linux/arm64" in result.output
    assert "docker run --privileged --rm tonistiigi/binfmt --install arm64" in result.output
    assert "Preflight failed: image platforms" in result.output
    assert fake_tools.calls() == []  # nothing slow started


def test_model_access_check_says_how_to_enable_the_model(aws: AwsEnv) -> None:
    """moto has no GetFoundationModelAvailability: botocore's Stubber (validating against the real
    service model) answers here. Against moto the check reports itself as not checked."""
    target = make_target(profile=None, region="us-east-1")
    with Stubber(target.client("bedrock")) as stub:
        stub.add_response("get_foundation_model_availability", {
            "modelId": "anthropic.claude-haiku-4-5-20251001-v1:0",
            "agreementAvailability": {"status": "PENDING"},
            "authorizationStatus": "NOT_AUTHORIZED",
            "entitlementAvailability": "NOT_AVAILABLE",
            "regionAvailability": "AVAILABLE",
        }, {"modelId": "anthropic.claude-haiku-4-5-20251001-v1:0"})
        stub.add_response("get_foundation_model_availability", {
            "modelId": "amazon.nova-lite-v1:0", "agreementAvailability": {"status": "AVAILABLE"},
            "authorizationStatus": "AUTHORIZED", "entitlementAvailability": "AVAILABLE",
            "regionAvailability": "AVAILABLE",
        }, {"modelId": "amazon.nova-lite-v1:0"})
        denied = check_model_access(target=target, model=DEFAULT_MODEL)
        granted = check_model_access(target=target, model="amazon.nova-lite-v1:0")
    assert not denied.ok
    assert "authorization NOT_AUTHORIZED, entitlement NOT_AVAILABLE, agreement PENDING" in denied.detail
    # The "Model access" page is retired: the hint names the Model catalog and what access needs now.
    assert "Model catalog" in denied.hint and "region=us-east-1#/model-catalog" in denied.hint
    assert granted.ok and granted.detail == "amazon.nova-lite-v1:0: available"
