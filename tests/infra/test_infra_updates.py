"""Endpoint updates that keep sessions, alarms that reach someone, a log group the stack owns.

Property names are CloudFormation's own (AWS::SageMaker::Endpoint DeploymentConfig,
RollingUpdatePolicy, CapacitySize, AutoRollbackConfig, RetainAllVariantProperties).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from infra_support import Synthesized, as_list, render

from infra import update_policy
from infra.config import ConfigError, Settings


def _endpoint_template(synth: Synthesized) -> Template:
    return Template.from_json(synth.templates["KokoroTtsEndpoint"])


def _resource(synth: Synthesized, kind: str) -> tuple[str, Mapping[str, Any]]:
    (found,) = _endpoint_template(synth).find_resources(kind).items()
    return found


def test_updates_roll_in_half_fleet_batches_and_keep_the_instance_count(default_synth: Synthesized) -> None:
    _, endpoint = _resource(default_synth, "AWS::SageMaker::Endpoint")
    props = endpoint["Properties"]
    assert props["RetainAllVariantProperties"] is True
    rolling = props["DeploymentConfig"]["RollingUpdatePolicy"]
    assert "BlueGreenUpdatePolicy" not in props["DeploymentConfig"]
    half = {"Type": "CAPACITY_PERCENT", "Value": 50}
    assert rolling["MaximumBatchSize"] == half
    assert rolling["RollbackMaximumBatchSize"] == half  # not the 100 % default: quota
    assert rolling["WaitIntervalInSeconds"] == 300
    assert 600 <= rolling["MaximumExecutionTimeoutInSeconds"] <= 28_800


def test_a_failing_batch_rolls_back_on_the_5xx_and_first_audio_alarms(default_synth: Synthesized) -> None:
    _, endpoint = _resource(default_synth, "AWS::SageMaker::Endpoint")
    alarms = endpoint["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    refs = {render(a["AlarmName"]) for a in alarms}
    template = _endpoint_template(default_synth)
    by_metric = {p["Properties"]["MetricName"]: f"${{{name}}}"
                 for name, p in template.find_resources("AWS::CloudWatch::Alarm").items()}
    assert refs == {by_metric["Invocation5XXErrors"], by_metric["SlowFirstAudio"]}
    # The bake period is long enough for either alarm to reach ALARM on the new batch.
    assert update_policy.BAKE_SECONDS >= 5 * 60


def test_the_drain_fits_in_sagemakers_stop_window() -> None:
    """Rolling batches stop old instances with SIGTERM, SIGKILL 30 s later: the container's
    longest drain (KOKORO_DRAIN_S cap) must end before that."""
    import re

    from infra.defaults import REPO_ROOT

    config = (REPO_ROOT / "containers/kokoro/kokoro_server/config.py").read_text()
    (cap,) = re.findall(r"^MAX_DRAIN_S = ([0-9.]+)", config, flags=re.MULTILINE)
    assert float(cap) < 30


@pytest.mark.parametrize(("max_instances", "peak"), [(1, 2), (2, 3), (3, 5), (10, 15)])
def test_what_an_update_needs_from_the_quota(max_instances: int, peak: int) -> None:
    assert update_policy.update_peak_instances(max_instances) == peak


def test_every_alarm_notifies_the_topic(default_synth: Synthesized) -> None:
    template = _endpoint_template(default_synth)
    topic, _ = _resource(default_synth, "AWS::SNS::Topic")
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic}]
    template.resource_count_is("AWS::SNS::Subscription", 0)  # no --alarm-email: no subscriber
    assert render(default_synth.templates["KokoroTtsEndpoint"]["Outputs"]["AlarmTopicArn"]["Value"]) == f"${{{topic}}}"


def test_the_first_audio_alarm_counts_late_utterances(default_synth: Synthesized) -> None:
    """A count a small fleet reaches, not a p95 CloudWatch leaves unevaluated below 200 samples."""
    alarms = _endpoint_template(default_synth).find_resources("AWS::CloudWatch::Alarm").values()
    (alarm,) = [a["Properties"] for a in alarms if a["Properties"]["MetricName"] == "SlowFirstAudio"]
    assert alarm["Statistic"] == "Sum" and "ExtendedStatistic" not in alarm
    assert "EvaluateLowSampleCountPercentile" not in alarm


def test_cloudwatch_may_publish_to_the_topic_for_its_alarms_only(default_synth: Synthesized) -> None:
    _, policy = _resource(default_synth, "AWS::SNS::TopicPolicy")
    statements = {s["Effect"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["Allow"]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    alarms = {f"${{{name}.Arn}}" for name in _endpoint_template(default_synth).find_resources("AWS::CloudWatch::Alarm")}
    assert set(render(statements["Allow"]["Condition"]["ArnLike"]["aws:SourceArn"])) == alarms
    assert statements["Deny"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_stack_owns_the_endpoint_log_group(default_synth: Synthesized) -> None:
    name, group = _resource(default_synth, "AWS::Logs::LogGroup")
    assert group["Properties"] == {"LogGroupName": "/aws/sagemaker/Endpoints/kokoro-tts", "RetentionInDays": 30}
    # Retain (with a static name) is what CloudFormation's auto-import of an existing group needs.
    assert group["DeletionPolicy"] == group["UpdateReplacePolicy"] == "Retain"
    _, endpoint = _resource(default_synth, "AWS::SageMaker::Endpoint")
    assert name in endpoint["DependsOn"]
    for flt in _endpoint_template(default_synth).find_resources("AWS::Logs::MetricFilter").values():
        assert flt["Properties"]["LogGroupName"] == {"Ref": name}


def _endpoint_stack(context: dict[str, str]) -> Template:
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3

    from infra.config import DEFAULTS
    from infra.tts_endpoint import TtsEndpointStack

    settings = Settings.from_context({**DEFAULTS, **context}.get)
    app = App()
    support = Stack(app, "Support")
    stack = TtsEndpointStack(app, "KokoroTtsEndpoint", settings=settings,
                             execution_role=iam.Role.from_role_name(support, "Role", "r"),
                             model_bucket=s3.Bucket.from_bucket_name(support, "Bucket", "model-cache-bucket"))
    return Template.from_stack(stack)


def test_alarm_email_subscribes_the_address() -> None:
    template = _endpoint_stack({"alarmEmail": "ops@example.com"})
    template.has_resource_properties("AWS::SNS::Subscription", {
        "Protocol": "email", "Endpoint": "ops@example.com", "TopicArn": Match.any_value()})


def test_a_bad_alarm_email_names_its_key() -> None:
    with pytest.raises(ConfigError, match="alarmEmail"):
        Settings.from_context(lambda key: "not-an-address" if key == "alarmEmail" else None)


def test_the_agent_role_holds_no_marketplace_action(default_synth: Synthesized) -> None:
    roles = Template.from_json(default_synth.templates["KokoroTtsFoundation"]).find_resources("AWS::IAM::Role")
    (agent,) = [r for name, r in roles.items() if name.startswith("AgentRuntimeRole")]
    statements = [s for p in agent["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]]
    assert not [a for s in statements for a in as_list(s["Action"]) if a.startswith("aws-marketplace:")]
    outputs = default_synth.templates["KokoroTtsFoundation"]["Outputs"]
    assert outputs["AgentRuntimeName"]["Value"] == "kokoro_voice_agent"