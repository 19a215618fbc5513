"""Where the agent's settings come from: command line first, then the environment, then defaults.

The TTS target is configuration, never code: a local server URL (``TTS_URL``) or a SageMaker
endpoint name (``TTS_ENDPOINT_NAME``). The model is Bedrock unless told otherwise or unless no AWS
credentials can be found, in which case the offline scripted model answers, so the demo and the
tests run on a laptop with no network. ``AGENT_MODEL=bedrock`` (what the deployed runtime sets)
turns that fallback into a start-up error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

DEFAULT_MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
DEFAULT_REGION = "us-east-1"
# Long enough for a spoken question with some pasted context; short enough that one request
# cannot make the model bill a novel.
DEFAULT_MAX_PROMPT_CHARS = 4_000
SYSTEM_PROMPT = (
    "You are a voice assistant. Everything you write is read aloud as you write it. "
    "Answer in short, plain spoken sentences: no markdown, no lists, no tables, no code blocks, "
    "no emojis. Spell out symbols when they matter. Keep answers under about 120 words unless "
    "the user asks for more."
)

ModelKind = Literal["bedrock", "offline"]
TtsKind = Literal["local", "sagemaker", "none"]


class ConfigError(ValueError):
    """A setting the agent cannot start with; the message names it."""


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Everything the app needs; built once at startup and never mutated."""

    model: ModelKind
    model_id: str = DEFAULT_MODEL_ID
    region: str = DEFAULT_REGION
    offline_reason: str | None = None  # why the offline model answers, shown on the page
    tts_url: str | None = None
    tts_endpoint: str | None = None
    voice: str | None = None  # None: the TTS server's default voice
    serve_page: bool = False
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    system_prompt: str = SYSTEM_PROMPT
    offline_token_ms: tuple[int, int] = (30, 60)  # pace of the scripted model, per token
    offline_first_token_ms: int = 300
    # A WebSocket client that reads nothing for this long is dropped (close 4002) and its turn ends,
    # so a stalled browser never holds a turn, its TTS session and the model's queue.
    send_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.tts_url and self.tts_endpoint:
            raise ConfigError("set either a TTS URL (TTS_URL) or a SageMaker endpoint (TTS_ENDPOINT_NAME), not both")
        if self.max_prompt_chars < 1:
            raise ConfigError("max_prompt_chars must be at least 1")
        if not self.send_timeout_s > 0:
            raise ConfigError(f"send_timeout_s must be positive, got {self.send_timeout_s}")
        low, high = self.offline_token_ms
        if not 0 <= low <= high:
            raise ConfigError(f"offline_token_ms must be 0 <= low <= high, got {self.offline_token_ms}")

    @property
    def tts_kind(self) -> TtsKind:
        if self.tts_url:
            return "local"
        if self.tts_endpoint:
            return "sagemaker"
        return "none"


def have_aws_credentials() -> bool:
    """True when boto3's chain finds credentials; never raises, never calls AWS."""
    try:
        import boto3

        return boto3.Session().get_credentials() is not None
    except Exception:  # a broken profile file means no usable credentials
        return False


def _flag(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"expected a boolean (1/0, true/false), got {value!r}")


def load_config(
    *,
    env: Mapping[str, str] | None = None,
    tts_url: str | None = None,
    tts_endpoint: str | None = None,
    offline: bool = False,
    page: bool | None = None,
    credentials_probe: object = None,
) -> AgentConfig:
    """Merge arguments over ``env`` (default ``os.environ``).

    ``credentials_probe`` is a zero-argument callable replacing :func:`have_aws_credentials` (tests).
    """
    env = os.environ if env is None else env
    url = tts_url or env.get("TTS_URL") or None
    endpoint = tts_endpoint or env.get("TTS_ENDPOINT_NAME") or None
    if tts_url and not tts_endpoint:
        endpoint = None  # an explicit URL on the command line wins over the environment's endpoint
    if tts_endpoint and not tts_url:
        url = None
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    wanted = (env.get("AGENT_MODEL") or "").strip().lower()
    if wanted not in ("", "bedrock", "offline"):
        raise ConfigError(f"AGENT_MODEL must be 'bedrock' or 'offline', got {wanted!r}")
    probe = credentials_probe if callable(credentials_probe) else have_aws_credentials
    reason: str | None = None
    if offline:
        reason = "--offline was given"
    elif wanted == "offline":
        reason = "AGENT_MODEL=offline"
    elif not probe():
        if wanted == "bedrock":
            # Deployed (the runtime sets AGENT_MODEL=bedrock): never answer with canned text.
            raise ConfigError("AGENT_MODEL=bedrock: no AWS credentials were found (set them, "
                              "or AGENT_MODEL=offline for the scripted model)")
        reason = "no AWS credentials were found"
    max_chars = env.get("AGENT_MAX_PROMPT_CHARS")
    send_timeout = env.get("AGENT_SEND_TIMEOUT_S")
    env_page = _flag(env.get("AGENT_PAGE"))
    return AgentConfig(
        model="offline" if reason else "bedrock",
        model_id=env.get("BEDROCK_MODEL_ID") or DEFAULT_MODEL_ID,
        region=region,
        offline_reason=reason,
        tts_url=url,
        tts_endpoint=endpoint,
        voice=env.get("TTS_VOICE") or None,
        # The page is for local use; AgentCore only routes /invocations, /ping and /ws anyway.
        serve_page=page if page is not None else (env_page if env_page is not None else url is not None),
        max_prompt_chars=int(max_chars) if max_chars else DEFAULT_MAX_PROMPT_CHARS,
        send_timeout_s=float(send_timeout) if send_timeout else 30.0,
    )
