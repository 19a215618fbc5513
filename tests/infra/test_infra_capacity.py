"""The scaling target comes from a measured capacity for the instance type, and says where from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from infra.capacity import REPO, UNMEASURED_TARGET, measured_capacity, scaling_target, target_for
from infra.config import DEFAULTS, ConfigError, Settings
from infra.tts_endpoint import TtsEndpointStack


def _measurement(tmp_path: Path, *, instance_type: str = "ml.g5.xlarge", sessions: int = 12) -> tuple[Path]:
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"timestamp": "2026-12-01T16:48:11+00:00",
                                "capacity": {"instance_type": instance_type, "sessions": sessions, "budget_ms": 1000}}))
    return (path,)


def _settings(results: tuple[Path, ...], **overrides: Any) -> Settings:
    return Settings.from_context({**DEFAULTS, **overrides}.get, capacity_results=results)


@pytest.mark.parametrize(("capacity", "target"), [(1, 1), (2, 1), (4, 3), (12, 9), (16, 12)])
def test_target_is_three_quarters_of_capacity_and_at_least_one(capacity: int, target: int) -> None:
    assert target_for(capacity) == target


def test_cdk_json_asks_for_the_measured_figure() -> None:
    assert DEFAULTS["targetConcurrentRequestsPerInstance"] == "measured"


def test_a_measurement_for_the_instance_type_sets_the_target(tmp_path: Path) -> None:
    config = _settings(_measurement(tmp_path))
    assert config.target_concurrent_requests_per_instance == 9
    assert config.scaling_target_measured
    assert "12 sessions measured in" in config.scaling_target_source and "2026-12-01" in config.scaling_target_source


def test_a_measurement_of_another_machine_is_not_used(tmp_path: Path) -> None:
    results = _measurement(tmp_path, instance_type="local", sessions=40)
    config = _settings(results)
    assert config.target_concurrent_requests_per_instance == UNMEASURED_TARGET
    assert not config.scaling_target_measured
    assert "bench.capacity --instance-type ml.g5.xlarge" in config.scaling_target_source
    assert _settings(results, instanceType="ml.c7i.xlarge", engine="onnx").target_concurrent_requests_per_instance == 8


def test_an_explicit_figure_is_taken_as_given(tmp_path: Path) -> None:
    config = _settings(_measurement(tmp_path), targetConcurrentRequestsPerInstance="50")
    assert (config.target_concurrent_requests_per_instance, config.scaling_target_measured) == (50, True)


@pytest.mark.parametrize("bad", ["fast", "measure", 0, "-3"])
def test_a_bad_target_names_the_key(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match="targetConcurrentRequestsPerInstance"):
        _settings(_measurement(tmp_path), targetConcurrentRequestsPerInstance=bad)


def test_the_stack_scales_and_alarms_at_the_measured_target(tmp_path: Path) -> None:
    app = App()
    support = Stack(app, "Support")
    stack = TtsEndpointStack(app, "KokoroTtsEndpoint", settings=_settings(_measurement(tmp_path, sessions=16)),
                             execution_role=iam.Role.from_role_name(support, "Role", "r"),
                             model_bucket=s3.Bucket.from_bucket_name(support, "Bucket", "model-cache-bucket"))
    template = Template.from_stack(stack)
    (policy,) = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    assert policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 12.0
    thresholds = {p["Properties"].get("MetricName"): p["Properties"]["Threshold"]
                  for p in template.find_resources("AWS::CloudWatch::Alarm").values()}
    assert thresholds["ConcurrentRequestsPerModel"] == 12
    assert not [a for a in app.synth().get_stack_by_name("KokoroTtsEndpoint").messages
                if "unmeasuredScalingTarget" in str(a.entry.data)]


def test_an_unmeasured_target_warns_at_synth(tmp_path: Path) -> None:
    app = App()
    support = Stack(app, "Support")
    TtsEndpointStack(app, "KokoroTtsEndpoint", settings=_settings(()),
                     execution_role=iam.Role.from_role_name(support, "Role", "r"),
                     model_bucket=s3.Bucket.from_bucket_name(support, "Bucket", "model-cache-bucket"))
    messages = [str(m.entry.data) for m in app.synth().get_stack_by_name("KokoroTtsEndpoint").messages]
    assert any("no measured capacity for ml.g5.xlarge" in m for m in messages), messages


def test_the_committed_measurement_is_read_for_the_machine_it_names() -> None:
    committed = REPO / "bench/results/capacity.json"
    block = json.loads(committed.read_text())["capacity"]
    found = measured_capacity(block["instance_type"], (committed,))
    target = scaling_target(block["instance_type"], (committed,))
    if block["sessions"] >= 1:
        assert found is not None and found.sessions == block["sessions"] and target.measured
    else:  # no rung passed on that machine: no figure to scale by, the estimate and its warning
        assert found is None and not target.measured
