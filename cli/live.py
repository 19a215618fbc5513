"""Live figures for `deploy-tts status`: first audio, sessions, queue, and alarms now in ALARM.

Read from CloudWatch: the voice metrics the endpoint stack's metric filters publish (namespace
``KokoroTTS/<endpoint>``, infra/voice_metrics.py) over the last WINDOW_MINUTES, and the alarms
whose description names the endpoint (every alarm of the stack starts with ``<endpoint>:``).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Final

from botocore.exceptions import ClientError
from rich.markup import escape

from cli.aws import AwsTarget, describe_error

WINDOW_MINUTES: Final = 15
_QUERIES: Final = (  # report key, metric, statistic
    ("first_audio_p95_ms", "FirstAudioMs", "p95"),
    ("open_sessions", "OpenSessions", "Average"),
    ("queued_model_jobs", "QueuedModelJobs", "Maximum"),
    ("stall_ms", "StallMs", "Sum"),
)


def live_report(*, target: AwsTarget, name: str, now: datetime | None = None) -> dict[str, Any]:
    """The figures over the window (None where no line was logged: an idle endpoint) and alarms;
    ``error`` instead when CloudWatch cannot be read (status still reports everything else)."""
    try:
        return _read(target=target, name=name, now=now)
    except ClientError as exc:
        return {"window_minutes": WINDOW_MINUTES, "error": describe_error(exc).message}


def _read(*, target: AwsTarget, name: str, now: datetime | None) -> dict[str, Any]:
    # To the next whole minute: CloudWatch aligns data to minutes, and the current minute counts.
    end = (now or datetime.now(timezone.utc)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    cloudwatch = target.client("cloudwatch")
    response = cloudwatch.get_metric_data(
        MetricDataQueries=[{
            "Id": f"q{index}",
            "MetricStat": {"Metric": {"Namespace": f"KokoroTTS/{name}", "MetricName": metric},
                           "Period": WINDOW_MINUTES * 60, "Stat": stat},
            "ReturnData": True,
        } for index, (_, metric, stat) in enumerate(_QUERIES)],
        StartTime=end - timedelta(minutes=WINDOW_MINUTES), EndTime=end,
    )
    values = {row["Id"]: row.get("Values") or [] for row in response.get("MetricDataResults", [])}
    report: dict[str, Any] = {"window_minutes": WINDOW_MINUTES}
    for index, (key, _, _) in enumerate(_QUERIES):
        found = values.get(f"q{index}") or []
        report[key] = round(float(found[0]), 1) if found else None
    alarms = []
    for page in cloudwatch.get_paginator("describe_alarms").paginate(StateValue="ALARM"):
        alarms += [a["AlarmName"] for a in page.get("MetricAlarms", [])
                   if str(a.get("AlarmDescription", "")).startswith(f"{name}:")]
    report["alarms_in_alarm"] = sorted(alarms)
    return report


def live_rows(live: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows for the status table."""
    if "error" in live:
        return [("  live figures", f"[red]unavailable: {escape(str(live['error']))}[/]")]
    def shown(value: Any, unit: str = "") -> str:
        return "no data" if value is None else f"{value:g}{unit}"
    firing = live["alarms_in_alarm"]
    return [
        (f"  first audio p95 ({live['window_minutes']} min)", shown(live["first_audio_p95_ms"], " ms")),
        ("  open sessions (avg per instance)", shown(live["open_sessions"])),
        ("  queued model jobs (max)", shown(live["queued_model_jobs"])),
        ("  stalls (total)", shown(live["stall_ms"], " ms")),
        ("  alarms in ALARM", f"[red]{escape(', '.join(firing))}[/]" if firing else "none"),
    ]
