"""Deployed, the agent never answers with canned text: AGENT_MODEL=bedrock (set by the runtime's
stack) without credentials or without model access stops it at start with what is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from agent_harness import free_port
from botocore.stub import Stubber

from voice_agent.config import AgentConfig, ConfigError, load_config
from voice_agent.model_check import check_bedrock_model


def test_bedrock_without_credentials_fails_at_start(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TTS_", "AGENT_"))}
    env.update(AGENT_MODEL="bedrock", AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_REGION="us-east-1",
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    result = subprocess.run([sys.executable, "-m", "voice_agent", "--port", str(free_port())],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "cannot start: AGENT_MODEL=bedrock: no AWS credentials were found" in result.stderr
    assert "offline" not in result.stderr.split("cannot start:")[0]  # it never started the scripted model


def _stubbed(code: str, message: str) -> tuple[object, Stubber]:
    client = boto3.client("bedrock-runtime", region_name="eu-west-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_client_error("converse_stream", service_error_code=code, service_message=message, http_status_code=403)
    return client, stub


def _bedrock_config() -> AgentConfig:
    env = {"AGENT_MODEL": "bedrock", "BEDROCK_MODEL_ID": "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
           "AWS_REGION": "eu-west-1"}
    return load_config(env=env, credentials_probe=lambda: True)


def test_no_model_access_names_the_model_and_the_fix() -> None:
    """botocore's Stubber answers as Bedrock does for a model without access (no stand-in here)."""
    client, stub = _stubbed("AccessDeniedException", "You don't have access to the model with the specified model ID.")
    with stub, pytest.raises(ConfigError) as raised:
        check_bedrock_model(_bedrock_config(), client=client)
    text = str(raised.value)
    assert "BEDROCK_MODEL_ID=eu.anthropic.claude-haiku-4-5-20251001-v1:0 in eu-west-1" in text
    assert "Model catalog" in text and "AccessDeniedException" in text


def test_a_transient_error_does_not_stop_the_agent() -> None:
    client, stub = _stubbed("ThrottlingException", "Too many requests")
    with stub:
        check_bedrock_model(_bedrock_config(), client=client)  # logged, not raised
