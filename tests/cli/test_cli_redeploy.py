"""A redeploy keeps the deployed settings: the Endpoint stack's DeployContext output is the
baseline, a flag changes one setting, and the plan shows the change before anything is applied.

AWS calls are real boto3 against moto_server; the CDK CLI is the stand-in (clitest_fake_cdk.py),
which records each deploy's `-c` context and writes the DeployContext output the real stack writes
for it. The templates compared are the real app's, synthesized from those recorded contexts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from clitest_support import make_model_dir, put_bootstrap_param
from typer.testing import CliRunner, Result

from cli import deploy_tts

if TYPE_CHECKING:
    from conftest import AwsEnv, FakeTools  # the fixtures' types

runner = CliRunner()
FIRST = ["--instance-type", "ml.c5.xlarge", "--engine", "onnx", "--min-instances", "2", "--max-instances", "4",
         "--alarm-email", "ops@example.com"]


def _deploy(model: Path, *args: str, answer: str | None = None) -> Result:
    base = ["deploy", "--wait-timeout", "30", "--model-dir", str(model)]
    return runner.invoke(deploy_tts.app, [*base, *(["--yes"] if answer is None else []), *args], input=answer)


def _endpoint_contexts(fake_tools: FakeTools) -> list[dict[str, str]]:
    """The `-c` context of every `cdk deploy KokoroTtsEndpoint`, in order."""
    found = []
    for call in fake_tools.calls():
        argv = call["argv"]
        if argv[2:4] == ["deploy", "KokoroTtsEndpoint"]:
            found.append(dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-c"))
    return found


def _synthesize(context: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from infra.snapshot import synthesize

    monkeypatch.setenv("PATH", os.environ["FAKE_CDK_REAL_PATH"])  # jsii needs the real node
    try:
        return synthesize(context)
    finally:
        monkeypatch.setenv("PATH", str(Path(os.environ["FAKE_CDK_LOG"]).parent / "bin"))


def test_a_second_deploy_without_flags_synthesizes_the_same_templates(
    aws: AwsEnv, fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    put_bootstrap_param()
    model = make_model_dir(tmp_path / "m")
    first = _deploy(model, *FIRST)
    assert first.exit_code == 0, first.output
    second = _deploy(model)
    assert second.exit_code == 0, second.output
    assert "no setting changes: the deployed settings are kept" in second.output
    assert "maxInstances  4" in second.output and "(deployed)" in second.output

    before, after = _endpoint_contexts(fake_tools)
    assert before == after
    templates = [_synthesize(context, monkeypatch) for context in (before, after)]
    assert templates[0] == templates[1]
    endpoint = templates[1]["KokoroTtsEndpoint"]["Resources"]
    kinds = {r["Type"]: r["Properties"] for r in endpoint.values()}
    assert kinds["AWS::SageMaker::EndpointConfig"]["ProductionVariants"][0]["InstanceType"] == "ml.c5.xlarge"
    target = kinds["AWS::ApplicationAutoScaling::ScalableTarget"]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 4)
    assert kinds["AWS::SNS::Subscription"]["Endpoint"] == "ops@example.com"


def test_a_flag_changes_one_setting_and_the_plan_says_so_before_anything(aws: AwsEnv, fake_tools: FakeTools,
                                                                          tmp_path: Path) -> None:
    put_bootstrap_param()
    model = make_model_dir(tmp_path / "m")
    assert _deploy(model, *FIRST).exit_code == 0
    deploys = len(fake_tools.calls())

    declined = _deploy(model, "--max-instances", "3", answer="n\n")
    assert declined.exit_code == 1 and "Aborted: nothing was deployed" in declined.output
    assert "changes: maxInstances 4 -> 3 (--max-instances)" in declined.output
    assert declined.output.index("changes:") < declined.output.index("Continue?")
    assert len(fake_tools.calls()) == deploys  # nothing applied

    changed = _deploy(model, "--max-instances", "3", "--alarm-email", "")
    assert changed.exit_code == 0, changed.output
    assert "alarmEmail ops@example.com -> (none) (--alarm-email)" in changed.output
    before, after = _endpoint_contexts(fake_tools)
    assert {k: v for k, v in after.items() if before.get(k) != v} == {"maxInstances": "3"}
    assert "alarmEmail" in before and "alarmEmail" not in after
