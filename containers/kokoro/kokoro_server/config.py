"""Server settings, read from the environment in one place so every knob is documented here."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from voicestream.protocol import LANGUAGES, MAX_TEXT_CHARS, aws

from .scheduler import DEFAULT_FIRST_AUDIO_S, DEFAULT_IDLE_AFTER_S, DEFAULT_MAX_SLACK_S

SAGEMAKER_MODEL_DIR = Path("/opt/ml/model")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


class ConfigError(ValueError):
    """A setting the server cannot start with; the message names the variable."""


def _int(env: dict[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name}: must be at least {minimum}, got {value}")
    return value


def _pace(raw: str | None) -> float | None:
    if raw is None or raw == "" or raw == "measure":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"KOKORO_DECODER_PACE: expected measure or decoder seconds per audio second, "
                          f"got {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise ConfigError(f"KOKORO_DECODER_PACE: must be 0 or more (0: no limit), got {raw!r}")
    return value


def _languages(raw: str | None) -> tuple[str, ...] | None:
    if not raw or not raw.strip():
        return None
    codes = tuple(dict.fromkeys(code.strip() for code in raw.split(",") if code.strip()))
    unknown = [code for code in codes if code not in LANGUAGES]
    if unknown or not codes:
        what = f"{', '.join(map(repr, unknown))} not Kokoro language codes" if unknown else "names no language"
        raise ConfigError(f"KOKORO_LANGUAGES: {what}; use some of {', '.join(LANGUAGES)}, comma-separated")
    return codes


def _seconds(env: dict[str, str], name: str, default: float, *, most: float | None = None) -> float:
    """Positive seconds; with ``most``, 0 to ``most`` (a grace, where 0 means none)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a number of seconds, got {raw!r}") from None
    if most is not None:
        if not 0 <= value <= most:
            raise ConfigError(f"{name}: must be 0 to {most:g} seconds, got {raw!r}")
    elif not value > 0 or value == float("inf"):
        raise ConfigError(f"{name}: must be a positive number of seconds, got {raw!r}")
    return value


# Limits, all configurable from the environment (docs/protocol.md#limits lists them with these
# defaults). Past any of them a client gets an error frame or a documented close code.
DEFAULT_MAX_SESSIONS = 64
DEFAULT_MAX_TURN_CHARS = 100_000
DEFAULT_MAX_QUEUED_UTTERANCES = 64
DEFAULT_IDLE_TIMEOUT_S = 300.0  # a session with no message and nothing to speak for this long is closed (4001)
DEFAULT_SEND_TIMEOUT_S = 30.0  # a client that reads nothing for this long while audio waits is dropped (4002)
# On SIGTERM, utterances in flight get this long to finish before their sessions close (1001).
# SageMaker sends SIGKILL 30 s after SIGTERM (its inference container guide): the drain, then
# the HTTP requests' shutdown, must fit in that.
DEFAULT_DRAIN_S = 20.0
MAX_DRAIN_S = 25.0
# A request in the AWS sample's shape whose request_timestamp is older than this is refused
# (HTTP 408 / an error holding ``request_stale``): SageMaker gives up on an invocation at 60 s.
DEFAULT_MAX_REQUEST_AGE_S = aws.DEFAULT_MAX_REQUEST_AGE_S


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the server needs to start. ``from_env`` documents each variable."""

    model_dir: Path
    engine: str | None = None  # None: whatever the model directory holds
    device: str | None = None  # None: cuda when available, else cpu
    default_voice: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_text_chars: int = MAX_TEXT_CHARS
    max_turn_chars: int = DEFAULT_MAX_TURN_CHARS
    max_queued_utterances: int = DEFAULT_MAX_QUEUED_UTTERANCES
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S
    max_request_age_s: float = DEFAULT_MAX_REQUEST_AGE_S
    drain_s: float = DEFAULT_DRAIN_S
    """SIGTERM: how long utterances in flight may take to finish (then 1001 closes their sessions)."""
    warmup: bool = True
    languages: tuple[str, ...] | None = None
    """KOKORO_LANGUAGES (``a,b,j``): the languages served, of those whose G2P is installed; None: all."""
    first_audio_s: float = DEFAULT_FIRST_AUDIO_S
    """Deadline scheduling: a new session's first window is due this long after it is asked for, so
    a listener that would run dry sooner goes first (scheduler.DEFAULT_FIRST_AUDIO_S)."""
    memory_trim_after_s: float = DEFAULT_IDLE_AFTER_S
    """How long the model queue stays dry after work before the memory its jobs freed is handed back
    to the system (scheduler.DEFAULT_IDLE_AFTER_S)."""
    decoder_pace: float | None = None
    """Decoder seconds per audio second the job sizer sizes windows by (sizing.Cost.pace); None
    (the default, ``KOKORO_DECODER_PACE=measure``): fitted, with a fixed cost per call, to windows
    decoded at warm-up and then to those served (pace.PaceMeter; 0 without warm-up); 0: a free
    decoder, each chunk one window."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = dict(os.environ if env is None else env)
        model_dir = env.get("KOKORO_MODEL_DIR") or (
            str(SAGEMAKER_MODEL_DIR) if SAGEMAKER_MODEL_DIR.exists() else ""
        )
        if not model_dir:
            raise ConfigError(
                "KOKORO_MODEL_DIR: not set and /opt/ml/model does not exist; point it at a model "
                "directory (`make tiny-model DIR=models/tiny` writes a small one)"
            )
        device = env.get("KOKORO_DEVICE") or None
        if device is not None and not _DEVICE.match(device):
            raise ConfigError(f"KOKORO_DEVICE: expected cpu, cuda or cuda:N, got {device!r}")
        engine = env.get("KOKORO_ENGINE") or None
        if engine not in (None, "torch", "onnx"):
            raise ConfigError(f"KOKORO_ENGINE: expected torch or onnx, got {engine!r}")
        return cls(
            model_dir=Path(model_dir),
            decoder_pace=_pace(env.get("KOKORO_DECODER_PACE")),
            first_audio_s=_seconds(env, "KOKORO_FIRST_AUDIO_S", DEFAULT_FIRST_AUDIO_S,
                                   most=DEFAULT_MAX_SLACK_S),
            memory_trim_after_s=_seconds(env, "KOKORO_MEMORY_TRIM_AFTER_S", DEFAULT_IDLE_AFTER_S),
            engine=engine,
            device=device,
            default_voice=env.get("KOKORO_DEFAULT_VOICE") or None,
            host=env.get("KOKORO_HOST", "127.0.0.1"),
            port=_int(env, "PORT", 8080),
            max_sessions=_int(env, "KOKORO_MAX_SESSIONS", DEFAULT_MAX_SESSIONS),
            max_text_chars=min(_int(env, "KOKORO_MAX_TEXT_CHARS", MAX_TEXT_CHARS), MAX_TEXT_CHARS),
            max_turn_chars=_int(env, "KOKORO_MAX_TURN_CHARS", DEFAULT_MAX_TURN_CHARS),
            max_queued_utterances=_int(env, "KOKORO_MAX_QUEUED_UTTERANCES", DEFAULT_MAX_QUEUED_UTTERANCES),
            idle_timeout_s=_seconds(env, "KOKORO_IDLE_TIMEOUT_S", DEFAULT_IDLE_TIMEOUT_S),
            send_timeout_s=_seconds(env, "KOKORO_SEND_TIMEOUT_S", DEFAULT_SEND_TIMEOUT_S),
            max_request_age_s=_seconds(env, "KOKORO_MAX_REQUEST_AGE_S", DEFAULT_MAX_REQUEST_AGE_S),
            drain_s=_seconds(env, "KOKORO_DRAIN_S", DEFAULT_DRAIN_S, most=MAX_DRAIN_S),
            warmup=env.get("KOKORO_WARMUP", "1") not in ("0", "false", "no"),
            languages=_languages(env.get("KOKORO_LANGUAGES")),
        )
