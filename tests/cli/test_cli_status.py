"""`status` of both CLIs against moto: deployed, half-deployed and absent resources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import typer
from clitest_support import (
    CACHE_BUCKET,
    REVISION,
    deploy_agent_runtime,
    deploy_endpoint,
    deploy_foundation,
    deploy_model_cache,
    make_model_dir,
    session,
)
from typer.testing import CliRunner

from cli import deploy_agent, deploy_tts
from cli.model_cache import sync_model_cache
from cli.model_sources import LocalDirSource

if TYPE_CHECKING:
    from conftest import AwsEnv  # the fixtures' types

runner = CliRunner()


def _json(app: typer.Typer, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["status", "--json", *args])
    assert result.exit_code == 0, result.output
    status: dict[str, Any] = json.loads(result.stdout)
    return status


def test_tts_status_when_nothing_is_deployed(aws: AwsEnv) -> None:
    report = _json(deploy_tts.app)
    assert report["account"] == "123456789012" and report["region"] == "us-east-1"
    assert [s["status"] for s in report["stacks"]] == ["NOT_DEPLOYED"] * 3
    assert report["endpoint"] == {"name": "kokoro-tts", "status": "NOT_FOUND"}
    assert report["model_cache"] == {"status": "NOT_DEPLOYED"}
    table = runner.invoke(deploy_tts.app, ["status"])
    assert table.exit_code == 0 and "not deployed" in table.stdout


def test_tts_status_reports_endpoint_and_manifest(aws: AwsEnv, tmp_path: Path) -> None:
    deploy_foundation()
    deploy_model_cache()
    deploy_endpoint()
    s3 = session().client("s3")
    sync_model_cache(
        s3=s3,
        bucket=CACHE_BUCKET,
        prefix=f"models/kokoro-82m/{REVISION}/",
        source=LocalDirSource(make_model_dir(tmp_path / "model")),
        revision=REVISION,
    )
    report = _json(deploy_tts.app)
    assert {s["name"]: s["status"] for s in report["stacks"]} == {
        "KokoroTtsFoundation": "CREATE_COMPLETE",
        "KokoroTtsModelCache": "CREATE_COMPLETE",
        "KokoroTtsEndpoint": "CREATE_COMPLETE",
    }
    endpoint = report["endpoint"]
    assert endpoint["status"] == "InService"
    assert endpoint["instance_type"] == "ml.m5.xlarge"
    assert endpoint["current_instance_count"] == 1
    cache = report["model_cache"]
    assert cache["status"] == "SYNCED" and cache["bucket"] == CACHE_BUCKET
    assert cache["model"] == "hexgrad/Kokoro-82M" and cache["revision"] == REVISION
    assert cache["file_count"] == 4 and cache["total_bytes"] == sum(
        p.stat().st_size for p in (tmp_path / "model").rglob("*") if p.suffix in (".json", ".pth", ".pt")
    )
    table = runner.invoke(deploy_tts.app, ["status"])
    assert table.exit_code == 0
    for text in ("InService", "ml.m5.xlarge", "1 current / 1 desired", "hexgrad/Kokoro-82M", "4 files"):
        assert text in table.stdout


def test_tts_status_with_cache_stack_but_no_manifest(aws: AwsEnv) -> None:
    deploy_model_cache()
    cache = _json(deploy_tts.app)["model_cache"]
    assert cache["status"] == "EMPTY" and "never synced" in cache["detail"]


def test_tts_status_endpoint_name_option(aws: AwsEnv) -> None:
    deploy_endpoint(name="other-endpoint")
    assert _json(deploy_tts.app, "--endpoint-name", "other-endpoint")["endpoint"]["status"] == "InService"


def test_agent_status_reports_runtime(aws: AwsEnv) -> None:
    deploy_foundation()
    deploy_endpoint()
    runtime_id = deploy_agent_runtime()
    report = _json(deploy_agent.app)
    assert {s["name"]: s["status"] for s in report["stacks"]}["KokoroAgentRuntime"] == "CREATE_COMPLETE"
    assert report["runtime"]["status"] == "READY" and report["runtime"]["id"] == runtime_id
    assert report["endpoint"]["status"] == "InService"
    table = runner.invoke(deploy_agent.app, ["status"])
    assert "READY" in table.stdout and "kokoro_voice_agent" in table.stdout


def test_agent_status_not_deployed(aws: AwsEnv) -> None:
    report = _json(deploy_agent.app)
    assert report["runtime"] == {"status": "NOT_DEPLOYED"}
    assert "endpoint" not in report


def test_agent_status_runtime_missing_is_explained(aws: AwsEnv) -> None:
    deploy_agent_runtime(runtime_id="gone-1234567890")
    runtime = _json(deploy_agent.app)["runtime"]
    assert runtime["status"] == "NOT_FOUND" and "deleted outside CloudFormation" in runtime["detail"]


def test_agent_status_when_agentcore_api_is_unreachable(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy_agent_runtime(runtime_id="rt-1234567890")
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE_CONTROL", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    runtime = _json(deploy_agent.app)["runtime"]
    assert runtime["status"] == "UNAVAILABLE"
    assert "could not reach the AgentCore control API" in runtime["detail"]
    table = runner.invoke(deploy_agent.app, ["status"])
    assert table.exit_code == 0 and "not available" in table.stdout


def test_tts_status_shows_live_figures_from_cloudwatch(aws: AwsEnv) -> None:
    """moto_server's CloudWatch: metric data as the stack's metric filters would publish it, and an
    alarm of the endpoint in ALARM next to another endpoint's. moto 5.2.5 cannot compute percentile
    statistics in GetMetricData (it fails with data present), so first audio is checked empty only."""
    from datetime import datetime, timezone

    deploy_foundation()
    deploy_model_cache()
    deploy_endpoint()
    cloudwatch = session().client("cloudwatch")
    now = datetime.now(timezone.utc)
    cloudwatch.put_metric_data(Namespace="KokoroTTS/kokoro-tts", MetricData=[
        {"MetricName": "OpenSessions", "Value": value, "Timestamp": now} for value in (3.0, 5.0)
    ] + [{"MetricName": "QueuedModelJobs", "Value": 2.0, "Timestamp": now}])
    for name, description in (("mine", "kokoro-tts: p95 first audio over budget"), ("other", "other-ep: x")):
        cloudwatch.put_metric_alarm(
            AlarmName=name, AlarmDescription=description, Namespace="KokoroTTS/x", MetricName="FirstAudioMs",
            Statistic="Average", Period=60, EvaluationPeriods=1, Threshold=1.0,
            ComparisonOperator="GreaterThanThreshold")
        cloudwatch.set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="test")
    report = _json(deploy_tts.app)
    live = report["live"]
    assert live["open_sessions"] == 4.0 and live["queued_model_jobs"] == 2.0
    assert live["first_audio_p95_ms"] is None  # nothing logged: no data, not zero
    assert live["alarms_in_alarm"] == ["mine"]
    table = runner.invoke(deploy_tts.app, ["status"])
    assert table.exit_code == 0 and "open sessions" in table.stdout and "mine" in table.stdout


def test_tts_status_survives_a_cloudwatch_error(aws: AwsEnv) -> None:
    """A CloudWatch failure (here moto's own 500 on a percentile with data present) costs the live
    figures only: status still reports the rest and exits 0."""
    from datetime import datetime, timezone

    deploy_foundation()
    deploy_model_cache()
    deploy_endpoint()
    session().client("cloudwatch").put_metric_data(Namespace="KokoroTTS/kokoro-tts", MetricData=[
        {"MetricName": "FirstAudioMs", "Value": 420.0, "Timestamp": datetime.now(timezone.utc)}])
    report = _json(deploy_tts.app)
    assert report["endpoint"]["status"] == "InService" and "error" in report["live"]
    table = runner.invoke(deploy_tts.app, ["status"])
    assert table.exit_code == 0 and "unavailable" in table.stdout
