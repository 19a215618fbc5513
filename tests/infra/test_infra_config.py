"""Context validation: every bad value fails early with the context key in the message."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.app import cdk_json_context, main
from infra.config import DEFAULTS, ConfigError, Settings, check_key_spelling


def settings(**overrides: Any) -> Settings:
    return Settings.from_context({**DEFAULTS, **overrides}.get)


def test_cdk_json_carries_every_default() -> None:
    context = cdk_json_context()
    assert {key: context[key] for key in DEFAULTS} == dict(DEFAULTS)


def test_defaults() -> None:
    empty: dict[str, Any] = {}
    config = Settings.from_context(empty.get)
    assert config.instance_type == "ml.g5.xlarge"
    assert config.engine == "torch"
    assert config.endpoint_name == "kokoro-tts"
    assert (config.min_instances, config.max_instances) == (1, 2)
    assert config.startup_health_check_timeout_seconds == 600
    assert config.model_revision == DEFAULTS["modelRevision"]  # cdk.json pins it: one definition
    assert config.model_prefix == f"models/kokoro-82m/{config.model_revision}/"
    assert config.agent_runtime_name == "kokoro_voice_agent"
    assert config.bedrock_geo == "us"
    assert config.bedrock_foundation_model == "anthropic.claude-haiku-4-5-20251001-v1:0"
    assert config.warnings == ()


def test_cli_style_strings_are_parsed() -> None:
    config = settings(minInstances="2", maxInstances="4", targetConcurrentRequestsPerInstance="50",
                      startupHealthCheckTimeoutSeconds="900")
    assert (config.min_instances, config.max_instances) == (2, 4)
    assert config.target_concurrent_requests_per_instance == 50
    assert config.startup_health_check_timeout_seconds == 900


@pytest.mark.parametrize(("key", "value"), [
    ("instanceType", "g5.xlarge"),
    ("instanceType", "ml.G5.xlarge"),
    ("instanceType", "ml.g5"),
    ("instanceType", ""),
    ("engine", "tensorrt"),
    ("endpointName", "-kokoro"),
    ("endpointName", "kokoro_tts"),
    ("endpointName", "k" * 64),
    ("minInstances", 0),
    ("minInstances", "one"),
    ("minInstances", True),
    ("maxInstances", 1.5),
    ("targetConcurrentRequestsPerInstance", 0),
    ("startupHealthCheckTimeoutSeconds", 30),
    ("startupHealthCheckTimeoutSeconds", 7200),
    ("modelRevision", "../escape"),
    ("bedrockModelId", "arn:aws:bedrock:us-east-1::foundation-model/x.y"),
    ("agentRuntimeName", "kokoro-voice-agent"),
    ("agentRuntimeName", "1agent"),
    ("autoscaling", "maybe"),
])
def test_invalid_value_names_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"context key '{key}'")) as caught:
        settings(**{key: value})
    assert caught.value.key == key


def test_min_greater_than_max_names_min_instances() -> None:
    with pytest.raises(ConfigError, match="context key 'minInstances'.*greater than maxInstances"):
        settings(minInstances=3, maxInstances=2)


@given(st.integers(1, 50), st.integers(1, 50))
def test_instance_bounds_property(low: int, high: int) -> None:
    if low <= high:
        config = settings(minInstances=low, maxInstances=high)
        assert config.min_instances <= config.max_instances
    else:
        with pytest.raises(ConfigError, match="minInstances"):
            settings(minInstances=low, maxInstances=high)


def test_onnx_on_gpu_is_refused() -> None:
    with pytest.raises(ConfigError, match="context key 'engine'.*CPU only"):
        settings(engine="onnx", instanceType="ml.g5.xlarge")


def test_onnx_on_cpu_is_accepted_without_warning() -> None:
    assert settings(engine="onnx", instanceType="ml.c7i.xlarge").warnings == ()


def test_torch_on_cpu_is_accepted_with_a_warning() -> None:
    config = settings(instanceType="ml.m5.xlarge")
    assert config.instance_type == "ml.m5.xlarge"
    assert not config.is_gpu_instance
    assert len(config.warnings) == 1 and "onnx" in config.warnings[0]


def test_neuron_instances_are_refused() -> None:
    with pytest.raises(ConfigError, match="context key 'instanceType'.*Neuron"):
        settings(instanceType="ml.inf2.xlarge")


def test_base_model_id_has_no_geo() -> None:
    config = settings(bedrockModelId="amazon.nova-lite-v1:0")
    assert config.bedrock_geo is None
    assert config.bedrock_foundation_model == "amazon.nova-lite-v1:0"


def test_misspelled_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="did you mean 'instanceType'"):
        check_key_spelling({"instancetype": "ml.m5.xlarge"})
    check_key_spelling({"instanceType": "ml.m5.xlarge", "@aws-cdk/core:foo": True})


def test_bad_context_fails_the_app_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-c", "instanceType=g5.xlarge", "-o", "/nonexistent/never-written"]) == 2
    assert "context key 'instanceType'" in capsys.readouterr().err
    assert main(["-c", "minInstances=3", "-c", "maxInstances=2", "-o", "/nonexistent/x"]) == 2
    assert "context key 'minInstances'" in capsys.readouterr().err
