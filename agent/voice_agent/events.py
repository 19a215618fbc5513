"""The agent's wire shapes: client requests in, events out (docs/agent.md#protocol).

One request shape serves both transports, so a client can switch between SSE and WebSocket
without rewriting its payloads. Validation names the field at fault and never raises anything
but :class:`RequestError`, which the transports turn into an ``error`` event while the session
stays open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

Mode = Literal["bidi", "batch"]
MODES: Final = ("bidi", "batch")
# One WebSocket message. A prompt is at most a few thousand characters; anything far bigger is
# a mistake or abuse, refused before parsing.
MAX_MESSAGE_BYTES: Final = 64 * 1024
MAX_VOICE_CHARS: Final = 128
_PROMPT_FIELDS: Final = frozenset({"type", "prompt", "mode", "voice"})

# Every event type the agent sends, on both transports (binary WS frames are audio).
EVENT_TYPES: Final = (
    "ready",            # WS only, once per connection: what answers and who speaks
    "start",            # a turn began: mode, voice, audio format
    "text",             # a delta of the agent's answer
    "sentence",         # a piece handed to the TTS session
    "audio",            # SSE only: base64 PCM; on WS the audio is a binary frame instead
    "first_audio",      # the turn's first audio chunk is leaving now (time to first audio)
    "text_end",         # the agent finished writing
    "interrupted",      # barge-in done: nothing more of the turn follows but ``end``
    "error",            # bad input, a TTS failure, a model failure
    "end",              # the turn is over; totals
)


class RequestError(ValueError):
    """A client message the agent refuses; ``code`` is machine-readable, ``field`` the culprit."""

    def __init__(self, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


@dataclass(frozen=True, kw_only=True)
class PromptRequest:
    """Speak an answer to ``prompt``."""

    prompt: str
    mode: Mode = "bidi"
    voice: str | None = None


@dataclass(frozen=True, kw_only=True)
class InterruptRequest:
    """Barge-in: stop writing and speaking the current turn. ``heard_ms``: how much of the turn's
    audio the listener had heard (the page knows it from Web Audio); None: the agent estimates."""

    heard_ms: int | None = None


ClientRequest = PromptRequest | InterruptRequest


def decode_message(raw: str | bytes) -> object:
    """A WebSocket frame as JSON, refusing oversized frames, non-UTF-8 and malformed JSON."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_MESSAGE_BYTES:
        raise RequestError("message_too_large", f"message of {size} bytes is over {MAX_MESSAGE_BYTES} bytes")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError("invalid_json", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise RequestError("invalid_json", f"not valid JSON: {exc}") from None


def parse_request(payload: object, *, max_prompt_chars: int, allow_interrupt: bool) -> ClientRequest:
    """Validate a decoded payload (an SSE body or a WS message)."""
    if not isinstance(payload, dict):
        raise RequestError("invalid_json", f"expected a JSON object, got {_kind(payload)}")
    kind = payload.get("type", "prompt")
    if kind == "interrupt" and allow_interrupt:
        extra = sorted(set(payload) - {"type", "heard_ms"})
        if extra:
            raise RequestError("invalid_field", f"{extra[0]}: not a field of an interrupt message",
                               field=extra[0])
        heard = payload.get("heard_ms")
        if heard is not None and (isinstance(heard, bool) or not isinstance(heard, int) or heard < 0):
            raise RequestError("invalid_field", f"heard_ms: must be a whole number of ms >= 0, got {heard!r}",
                               field="heard_ms")
        return InterruptRequest(heard_ms=heard)
    if kind != "prompt":
        expected = "prompt, interrupt" if allow_interrupt else "prompt"
        shown = kind[:40] if isinstance(kind, str) else _kind(kind)
        raise RequestError("unknown_type", f"type: unknown message type {shown!r}; expected one of {expected}",
                           field="type")
    unknown = sorted(set(payload) - _PROMPT_FIELDS)
    if unknown:
        raise RequestError("invalid_field", f"{unknown[0]}: not a field of a prompt", field=unknown[0])
    if "prompt" not in payload:
        raise RequestError("missing_field", "prompt: is required", field="prompt")
    prompt = payload["prompt"]
    if not isinstance(prompt, str):
        raise RequestError("invalid_field", f"prompt: must be a string, got {_kind(prompt)}", field="prompt")
    if not prompt.strip():
        raise RequestError("empty_prompt", "prompt: must not be empty or whitespace", field="prompt")
    if len(prompt) > max_prompt_chars:
        message = f"prompt: {len(prompt)} characters is over the limit of {max_prompt_chars}"
        raise RequestError("prompt_too_long", message, field="prompt")
    mode = payload.get("mode", "bidi")
    if mode not in MODES:
        shown = mode[:40] if isinstance(mode, str) else _kind(mode)
        raise RequestError("unknown_mode", f"mode: unknown mode {shown!r}; expected one of {', '.join(MODES)}",
                           field="mode")
    voice = payload.get("voice")
    if voice is not None and (not isinstance(voice, str) or not voice or len(voice) > MAX_VOICE_CHARS):
        message = f"voice: must be a non-empty string of at most {MAX_VOICE_CHARS} characters"
        raise RequestError("invalid_field", message, field="voice")
    return PromptRequest(prompt=prompt, mode=mode, voice=voice)


def error_event(code: str, message: str, *, field: str | None = None, turn: int | None = None,
                t_ms: int | None = None) -> dict[str, Any]:
    """An ``error`` event; ``turn``/``t_ms`` are present when a turn is running."""
    event: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if field is not None:
        event["field"] = field
    if turn is not None:
        event["turn"] = turn
    event["t_ms"] = 0 if t_ms is None else t_ms
    return event


def request_error_event(exc: RequestError) -> dict[str, Any]:
    return error_event(exc.code, exc.message, field=exc.field)


def _kind(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(value), type(value).__name__)
