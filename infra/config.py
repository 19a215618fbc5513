"""Every CDK context value the stacks use, read and validated in one place.

Stacks never call ``try_get_context`` themselves: they receive a frozen :class:`Settings`, so a
bad value fails synthesis once, early, with a message that names the context key to fix.
Values may arrive typed (cdk.json, tests) or as strings (``cdk -c minInstances=2``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from infra.capacity import MEASURED, RESULTS, scaling_target
from infra.defaults import BOOTSTRAP_QUALIFIER_KEY, DEFAULT_QUALIFIER, shared_defaults

if TYPE_CHECKING:  # no CDK import at run time: the CLIs validate their flags with these rules
    from constructs import IConstruct

MODEL_CACHE_ROOT: Final = "models/kokoro-82m"
"""Key prefix under which the CLI syncs each Hugging Face revision (one folder per revision)."""

DEFAULTS: Final[Mapping[str, Any]] = shared_defaults()
"""Fallbacks when a key is absent: cdk.json's own values (infra/defaults.py reads them)."""

ENGINES: Final = ("torch", "onnx")

AUTOSCALING_KEY: Final = "autoscaling"
"""Not in cdk.json: deploy-tts passes autoscaling=false for one intermediate deploy."""

ALARM_EMAIL_KEY: Final = "alarmEmail"
"""Not in cdk.json: deploy-tts --alarm-email passes it; the alarm topic subscribes the address."""

_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9]+\.[a-z0-9]+$")
# SageMaker EndpointName: alphanumerics and hyphens, no leading/trailing hyphen, at most 63.
_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# AgentCore AgentRuntimeName (CloudFormation schema pattern).
_RUNTIME_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$")
_QUALIFIER = re.compile(r"^[a-z0-9]{1,10}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# A Hugging Face revision becomes an S3 key segment: keep it to safe characters.
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# Either a base model id ("anthropic.claude-...") or a cross-Region inference profile id
# ("us.anthropic.claude-..."); ARNs are refused so the IAM policy can be derived from the id.
_MODEL_ID = re.compile(
    r"^(?:(?P<geo>us|eu|apac|jp|au|ca|us-gov|global)\.)?"
    r"(?P<model>[a-z0-9-]+\.[A-Za-z0-9._:-]+)$"
)
# Instance families without a CUDA GPU for torch but with an accelerator neither engine uses.
_NEURON_FAMILY = re.compile(r"^(inf|trn)\d")
_GPU_FAMILY = re.compile(r"^(g|p)\d")


DEPLOY_CONTEXT_KEYS: Final = ("instanceType", "engine", "endpointName", "minInstances", "maxInstances",
                               "modelRevision", ALARM_EMAIL_KEY)
"""The settings deploy-tts sets by flag; the endpoint stack's DeployContext output records them."""


class ConfigError(ValueError):
    """A context value is missing or invalid; the message names the context key."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"context key '{key}': {problem} (set it in cdk.json or with -c {key}=...)")
        self.key = key
        self.problem = problem


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Validated deployment settings shared by all four stacks."""

    instance_type: str
    engine: str
    endpoint_name: str
    min_instances: int
    max_instances: int
    target_concurrent_requests_per_instance: int
    scaling_target_source: str
    """Where the target came from: a measurement (infra/capacity.py), the estimate, or cdk.json."""
    scaling_target_measured: bool
    """False only for the unmeasured estimate: the endpoint stack then warns at synth."""
    startup_health_check_timeout_seconds: int
    model_revision: str
    bedrock_model_id: str
    agent_runtime_name: str
    bootstrap_qualifier: str = "hnb659fds"
    autoscaling: bool = True
    """False only for deploy-tts's intermediate deploy of an instance-type change (cli/scaling.py)."""
    first_audio_budget_ms: int = 1000
    """The promise: p95 time to first audio in the container; the first-audio alarm's threshold."""
    alarm_email: str | None = None
    """Subscribed (email protocol) to the alarm topic when set."""
    warnings: tuple[str, ...] = ()

    def deploy_context(self) -> dict[str, str | int]:
        """The DEPLOY_CONTEXT_KEYS as this deploy received them (alarmEmail only when set)."""
        context: dict[str, str | int] = {
            "instanceType": self.instance_type, "engine": self.engine, "endpointName": self.endpoint_name,
            "minInstances": self.min_instances, "maxInstances": self.max_instances,
            "modelRevision": self.model_revision,
        }
        if self.alarm_email:
            context[ALARM_EMAIL_KEY] = self.alarm_email
        return context

    @property
    def model_prefix(self) -> str:
        """S3 key prefix of this revision, with the trailing slash SageMaker's S3Prefix expects."""
        return f"{MODEL_CACHE_ROOT}/{self.model_revision}/"

    @property
    def instance_family(self) -> str:
        return self.instance_type.split(".")[1]

    @property
    def is_gpu_instance(self) -> bool:
        return bool(_GPU_FAMILY.match(self.instance_family))

    @property
    def bedrock_geo(self) -> str | None:
        """Inference-profile geography prefix ("us", "global", ...), None for a base model id."""
        match = _MODEL_ID.match(self.bedrock_model_id)
        assert match is not None  # validated in from_context
        return match.group("geo")

    @property
    def bedrock_foundation_model(self) -> str:
        """The foundation model id behind the configured id (profile prefix removed)."""
        match = _MODEL_ID.match(self.bedrock_model_id)
        assert match is not None
        return match.group("model")

    @classmethod
    def from_scope(cls, scope: IConstruct) -> Settings:
        """Read the settings from a construct's context (normally the App)."""
        return cls.from_context(scope.node.try_get_context)

    @classmethod
    def from_context(cls, get: Callable[[str], Any], *, capacity_results: tuple[Path, ...] = RESULTS) -> Settings:
        """Validate every key; raise :class:`ConfigError` on the first bad one.

        ``capacity_results``: where ``targetConcurrentRequestsPerInstance: measured`` looks.
        """

        def value(key: str) -> Any:
            raw = get(key)
            return DEFAULTS[key] if raw is None else raw

        instance_type = _text(value("instanceType"), "instanceType", _INSTANCE_TYPE,
                              "expected a SageMaker instance type such as ml.g5.xlarge")
        engine = _text(value("engine"), "engine", None, "")
        if engine not in ENGINES:
            raise ConfigError("engine", f"{engine!r} is not one of {', '.join(ENGINES)}")
        endpoint_name = _text(value("endpointName"), "endpointName", _ENDPOINT_NAME,
                              "SageMaker endpoint names are 1-63 letters, digits and inner hyphens")
        min_instances = _integer(value("minInstances"), "minInstances", low=1)
        max_instances = _integer(value("maxInstances"), "maxInstances", low=1)
        if min_instances > max_instances:
            raise ConfigError(
                "minInstances",
                f"minInstances ({min_instances}) is greater than maxInstances ({max_instances})",
            )
        target, target_source, target_measured = _scaling_target(
            value("targetConcurrentRequestsPerInstance"), instance_type, capacity_results)
        startup = _integer(value("startupHealthCheckTimeoutSeconds"),
                           "startupHealthCheckTimeoutSeconds", low=60, high=3600)
        revision = _text(value("modelRevision"), "modelRevision", _REVISION,
                         "expected a Hugging Face revision (commit hash recommended)")
        model_id = _text(value("bedrockModelId"), "bedrockModelId", _MODEL_ID,
                         "expected a Bedrock model id or inference profile id, not an ARN")
        runtime_name = _text(value("agentRuntimeName"), "agentRuntimeName", _RUNTIME_NAME,
                             "AgentCore runtime names match ^[a-zA-Z][a-zA-Z0-9_]{0,47}$")

        budget = _integer(value("firstAudioBudgetMs"), "firstAudioBudgetMs", low=50, high=60_000)
        qualifier = get(BOOTSTRAP_QUALIFIER_KEY) or DEFAULT_QUALIFIER
        qualifier = _text(qualifier, BOOTSTRAP_QUALIFIER_KEY, _QUALIFIER,
                          "CDK bootstrap qualifiers are 1-10 lowercase letters and digits")
        warnings = _engine_compatibility(engine, instance_type)
        autoscaling = _boolean(get(AUTOSCALING_KEY), AUTOSCALING_KEY, default=True)
        email = get(ALARM_EMAIL_KEY) or None
        if email is not None:
            email = _text(email, ALARM_EMAIL_KEY, _EMAIL, "expected an email address such as ops@example.com")
        return cls(
            instance_type=instance_type,
            engine=engine,
            endpoint_name=endpoint_name,
            min_instances=min_instances,
            max_instances=max_instances,
            target_concurrent_requests_per_instance=target,
            scaling_target_source=target_source,
            scaling_target_measured=target_measured,
            startup_health_check_timeout_seconds=startup,
            model_revision=revision,
            bedrock_model_id=model_id,
            agent_runtime_name=runtime_name,
            bootstrap_qualifier=qualifier,
            autoscaling=autoscaling,
            first_audio_budget_ms=budget,
            alarm_email=email,
            warnings=warnings,
        )


def check_key_spelling(context_keys: Mapping[str, Any]) -> None:
    """Refuse a key that differs from a known one only by case (a silent default otherwise)."""
    known = {key.lower(): key for key in DEFAULTS}
    for key in context_keys:
        canonical = known.get(key.lower())
        if canonical is not None and canonical != key:
            raise ConfigError(key, f"unknown key; did you mean '{canonical}'?")


def _engine_compatibility(engine: str, instance_type: str) -> tuple[str, ...]:
    """The onnx engine is CPU-only: paying for a GPU it never uses is refused, not warned."""
    family = instance_type.split(".")[1]
    if _NEURON_FAMILY.match(family):
        raise ConfigError("instanceType", f"{instance_type} is an AWS Neuron instance; "
                          "neither the torch nor the onnx engine runs on Neuron")
    if engine == "onnx" and _GPU_FAMILY.match(family):
        raise ConfigError("engine", f"engine 'onnx' runs on CPU only, so the GPU of {instance_type} "
                          "would sit idle; use engine 'torch' or a CPU instance type such as ml.c7i.xlarge")
    if engine == "torch" and not _GPU_FAMILY.match(family):
        return (f"engine 'torch' on CPU instance {instance_type}: it works but synthesizes slower "
                "than real time for long text; consider engine 'onnx' for CPU instances",)
    return ()


def _scaling_target(raw: Any, instance_type: str, results: tuple[Path, ...]) -> tuple[int, str, bool]:
    """``measured``: from bench/results for this instance type (the estimate while there is none);
    an integer: the user's own figure, taken as given (counted as measured: no warning)."""
    key = "targetConcurrentRequestsPerInstance"
    if raw == MEASURED:
        found = scaling_target(instance_type, results)
        return found.value, found.source, found.measured
    if isinstance(raw, str) and not re.fullmatch(r"\s*-?\d+\s*", raw):
        raise ConfigError(key, f"expected '{MEASURED}' or an integer, got {raw!r}")
    return _integer(raw, key, low=1), f"{key} set to it in cdk.json or with -c", True


def _text(raw: Any, key: str, pattern: re.Pattern[str] | None, hint: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ConfigError(key, f"expected a non-empty string, got {raw!r}")
    if pattern is not None and not pattern.match(raw):
        raise ConfigError(key, f"{raw!r} is invalid: {hint}")
    return raw


def _boolean(raw: Any, key: str, *, default: bool) -> bool:
    if raw is None:
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(key, f"expected true or false, got {raw!r}")


def _integer(raw: Any, key: str, *, low: int, high: int | None = None) -> int:
    if isinstance(raw, bool):
        raise ConfigError(key, f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        number = raw
    elif isinstance(raw, str) and re.fullmatch(r"\s*-?\d+\s*", raw):
        number = int(raw)
    else:
        raise ConfigError(key, f"expected an integer, got {raw!r}")
    if number < low or (high is not None and number > high):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(key, f"expected an integer {bound}, got {number}")
    return number
