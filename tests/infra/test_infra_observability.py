"""The endpoint stack's alarms and dashboard, read from the synthesized template."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template
from infra_support import Synthesized, render

from infra.config import ConfigError, Settings


def _alarms(synth: Synthesized) -> dict[str, dict[str, Any]]:
    template = Template.from_json(synth.templates["KokoroTtsEndpoint"])
    return {name: r["Properties"] for name, r in template.find_resources("AWS::CloudWatch::Alarm").items()}


def _alarm(synth: Synthesized, metric: str) -> dict[str, Any]:
    (props,) = [p for p in _alarms(synth).values() if p.get("MetricName") == metric]
    return props


def test_first_audio_alarm_counts_utterances_over_the_configured_budget(default_synth: Synthesized,
                                                                        override_synth: Synthesized) -> None:
    alarm = _alarm(default_synth, "SlowFirstAudio")
    assert alarm["Namespace"] == "KokoroTTS/kokoro-tts" and alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 3 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Period"] == 60 and (alarm["DatapointsToAlarm"], alarm["EvaluationPeriods"]) == (3, 5)
    assert alarm["AlarmName"] == "kokoro-tts-slow-first-audio"
    for synth, budget in ((default_synth, 1000), (override_synth, 750)):
        (flt,) = [r["Properties"] for r in synth.templates["KokoroTtsEndpoint"]["Resources"].values()
                  if r["Type"] == "AWS::Logs::MetricFilter"
                  and r["Properties"]["MetricTransformations"][0]["MetricName"] == "SlowFirstAudio"]
        assert flt["FilterPattern"].endswith(f"($.first_audio_ms > {budget}) }}")


def test_no_alarm_pages_an_idle_endpoint(default_synth: Synthesized) -> None:
    alarms = _alarms(default_synth)
    assert len(alarms) == 4
    assert {p["TreatMissingData"] for p in alarms.values()} == {"notBreaching"}
    assert "ModelLatency" not in {p.get("MetricName") for p in alarms.values()}


def test_saturation_and_restart_alarms(default_synth: Synthesized) -> None:
    saturation = _alarm(default_synth, "ConcurrentRequestsPerModel")
    policy = next(r["Properties"] for r in default_synth.templates["KokoroTtsEndpoint"]["Resources"].values()
                  if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy")
    target = policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"]
    assert saturation["Threshold"] == target  # the scaling policy's own target, not a second constant
    assert saturation["EvaluationPeriods"] * saturation["Period"] >= 15 * 60
    restarts = _alarm(default_synth, "ContainerRestarts")
    assert restarts["Threshold"] == 1 and restarts["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_dashboard_shows_what_the_issue_asks(default_synth: Synthesized) -> None:
    template = Template.from_json(default_synth.templates["KokoroTtsEndpoint"])
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.loads(render(dashboard["Properties"]["DashboardBody"]))
    text = json.dumps(body)
    for metric in ("ConcurrentRequestsPerModel", "FirstAudioMs", "StallMs", "FirstChunkLatency", "Invocation5XXErrors",
                   "GPUUtilization", "OpenSessions", "QueuedModelJobs", "ContainerRestarts"):
        assert metric in text, metric
    annotations = [a["value"] for w in body["widgets"]
                   for a in w["properties"].get("annotations", {}).get("horizontal", [])]
    assert 1000 in annotations and 8 in annotations  # the budget and the scaling target (unmeasured estimate)


@pytest.mark.parametrize("bad", ["0", "fast", "120000"])
def test_a_bad_budget_names_its_key(bad: str) -> None:
    with pytest.raises(ConfigError, match="firstAudioBudgetMs"):
        Settings.from_context(lambda key: bad if key == "firstAudioBudgetMs" else None)


def test_status_reads_what_the_stack_publishes(default_synth: Synthesized) -> None:
    """`deploy-tts status` queries metrics by name (cli never imports infra): each must be one a
    deployed filter publishes, in the namespace it publishes to."""
    from cli import live

    published = {(t["MetricNamespace"], t["MetricName"])
                 for r in default_synth.templates["KokoroTtsEndpoint"]["Resources"].values()
                 if r["Type"] == "AWS::Logs::MetricFilter" for t in r["Properties"]["MetricTransformations"]}
    for _, metric, _ in live._QUERIES:
        assert ("KokoroTTS/kokoro-tts", metric) in published, metric
