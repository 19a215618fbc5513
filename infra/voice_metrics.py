"""The container's voice-metric log lines as CloudWatch metric filters: plain data, no CDK.

The container writes one JSON object per line (containers/kokoro/kokoro_server/metrics.py); each
filter here selects lines by JSON field equality, existence and one numeric comparison only
(``{ ($.a = "b") && ($.c = *) && ($.d > 1000) }``, CloudWatch's JSON filter-pattern syntax), so a
test can evaluate the very patterns the stack deploys against real server output
(tests/infra/test_infra_voice_metrics.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

NAMESPACE_PREFIX: Final = "KokoroTTS"
LOG_GROUP_PREFIX: Final = "/aws/sagemaker/Endpoints/"
"""Where SageMaker sends an endpoint's container stdout/stderr (SageMaker developer guide, "Log
Amazon SageMaker AI events with Amazon CloudWatch")."""

FIRST_AUDIO: Final = "FirstAudioMs"
SYNTHESIS: Final = "SynthesisMs"
STALL: Final = "StallMs"
UTTERANCES: Final = "Utterances"
SLOW_FIRST_AUDIO: Final = "SlowFirstAudio"
"""Utterances whose first audio took longer than the budget: a count a small fleet fills, where a
p95 needs 200 samples a minute before CloudWatch evaluates it (EvaluateLowSampleCountPercentile)."""
OPEN_SESSIONS: Final = "OpenSessions"
QUEUE_DEPTH: Final = "QueuedModelJobs"
RUNNING: Final = "RunningModelJobs"
RESTARTS: Final = "ContainerRestarts"


@dataclass(frozen=True, kw_only=True)
class FilterSpec:
    """One metric filter: which lines (``kind`` plus a field that must exist) and what value."""

    metric: str
    kind: str
    value_field: str | None  # None: count the line (value 1)
    unit: str
    dimensions: dict[str, str] = field(default_factory=dict)  # dimension name -> JSON field
    above: tuple[str, int] | None = None  # (JSON field, bound): only lines where field > bound

    @property
    def pattern(self) -> str:
        clauses = [f'($.kokoro_metric = "{self.kind}")']
        if self.value_field:
            clauses.append(f"($.{self.value_field} = *)")
        clauses += [f"($.{name} = *)" for name in self.dimensions.values()]
        if self.above:
            clauses.append(f"($.{self.above[0]} > {self.above[1]})")
        return "{ " + " && ".join(clauses) + " }"

    @property
    def value(self) -> str:
        return f"$.{self.value_field}" if self.value_field else "1"


FILTERS: Final[tuple[FilterSpec, ...]] = (
    FilterSpec(metric=FIRST_AUDIO, kind="utterance", value_field="first_audio_ms", unit="Milliseconds"),
    FilterSpec(metric=SYNTHESIS, kind="utterance", value_field="synthesis_ms", unit="Milliseconds"),
    FilterSpec(metric=STALL, kind="utterance", value_field="stall_ms", unit="Milliseconds"),
    FilterSpec(metric=UTTERANCES, kind="utterance", value_field=None, unit="Count",
               dimensions={"Format": "format"}),
    FilterSpec(metric=OPEN_SESSIONS, kind="load", value_field="sessions", unit="Count"),
    FilterSpec(metric=QUEUE_DEPTH, kind="load", value_field="queued", unit="Count"),
    FilterSpec(metric=RUNNING, kind="load", value_field="running", unit="Count"),
    FilterSpec(metric=RESTARTS, kind="restart", value_field=None, unit="Count"),
)


def slow_first_audio(budget_ms: int) -> FilterSpec:
    """Count (value 1) each utterance whose first audio exceeded ``budget_ms``."""
    return FilterSpec(metric=SLOW_FIRST_AUDIO, kind="utterance", value_field=None, unit="Count",
                      above=("first_audio_ms", budget_ms))


def filters(budget_ms: int) -> tuple[FilterSpec, ...]:
    """Every filter the endpoint stack deploys for a first-audio budget of ``budget_ms``."""
    return (*FILTERS, slow_first_audio(budget_ms))


def namespace(endpoint_name: str) -> str:
    """One namespace per endpoint: metric filters can only take dimensions from the log line."""
    return f"{NAMESPACE_PREFIX}/{endpoint_name}"


def log_group_name(endpoint_name: str) -> str:
    return f"{LOG_GROUP_PREFIX}{endpoint_name}"
