"""What a client sends the agent (docs/agent.md#requests): typed requests and their one parser.

One request shape serves both transports, so a client can switch between SSE and WebSocket
without rewriting its payloads. Parsing is built on the TTS protocol's field validators
(:mod:`voicestream.protocol.fields`) and refuses with its :class:`ProtocolError`, naming the field
at fault; the transports turn that into an ``error`` event while the session stays open. The
agent keeps its own documented codes where its requests differ (``empty_prompt``,
``prompt_too_long``, ``unknown_mode``, ``missing_field``, ``message_too_large``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from voicestream.protocol.fields import ProtocolError, check_identifier, load_object, reject_unknown
from voicestream.protocol.languages import optional_lang

Mode = Literal["bidi", "batch"]
MODES: Final = ("bidi", "batch")
# One WebSocket message. A prompt is at most a few thousand characters; anything far bigger is
# a mistake or abuse, refused before parsing.
MAX_MESSAGE_BYTES: Final = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class PromptRequest:
    """Speak an answer to ``prompt``."""

    prompt: str
    mode: Mode = "bidi"
    voice: str | None = None
    lang: str | None = None  # the language the answer is read in (Kokoro's codes); None: the voice's


@dataclass(frozen=True, kw_only=True)
class InterruptRequest:
    """Barge-in: stop writing and speaking the current turn. ``heard_ms``: how much of the turn's
    audio the listener had heard (the page knows it from Web Audio); None: the agent estimates."""

    heard_ms: int | None = None


ClientRequest = PromptRequest | InterruptRequest

_FIELDS: Final[dict[str, frozenset[str]]] = {
    "prompt": frozenset({"type", "prompt", "mode", "voice", "lang"}),
    "interrupt": frozenset({"type", "heard_ms"}),
}


def decode_message(raw: str | bytes) -> dict[str, Any]:
    """A WebSocket frame or SSE body as a JSON object, refusing oversized ones first."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError("message_too_large", f"message of {size} bytes is over {MAX_MESSAGE_BYTES} bytes")
    return load_object(raw)


def parse_request(payload: object, *, max_prompt_chars: int, allow_interrupt: bool) -> ClientRequest:
    """Validate a decoded payload (an SSE body, which AgentCore has decoded, or a WS message)."""
    if not isinstance(payload, dict):
        raise ProtocolError("invalid_json", f"expected a JSON object, got {_kind(payload)}")
    kind = payload.get("type", "prompt")
    if not isinstance(kind, str) or kind not in _FIELDS or (kind == "interrupt" and not allow_interrupt):
        expected = "prompt, interrupt" if allow_interrupt else "prompt"
        shown = kind[:40] if isinstance(kind, str) else _kind(kind)
        raise ProtocolError("unknown_type", f"type: unknown message type {shown!r}; expected one of {expected}",
                            field="type")
    reject_unknown(payload, _FIELDS[kind], "an interrupt message" if kind == "interrupt" else "a prompt")
    if kind == "interrupt":
        return InterruptRequest(heard_ms=_heard_ms(payload.get("heard_ms")))
    return PromptRequest(prompt=_prompt(payload, max_chars=max_prompt_chars), mode=_mode(payload.get("mode", "bidi")),
                         voice=check_identifier(payload["voice"], name="voice") if "voice" in payload else None,
                         lang=optional_lang(payload))


def _heard_ms(value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ProtocolError("invalid_field", f"heard_ms: must be a whole number of ms >= 0, got {value!r}",
                            field="heard_ms")
    return value


def _prompt(payload: dict[str, Any], *, max_chars: int) -> str:
    if "prompt" not in payload:
        raise ProtocolError("missing_field", "prompt: is required", field="prompt")
    prompt = payload["prompt"]
    if not isinstance(prompt, str):
        raise ProtocolError("invalid_field", f"prompt: must be a string, got {_kind(prompt)}", field="prompt")
    if not prompt.strip():
        raise ProtocolError("empty_prompt", "prompt: must not be empty or whitespace", field="prompt")
    if len(prompt) > max_chars:
        message = f"prompt: {len(prompt)} characters is over the limit of {max_chars}"
        raise ProtocolError("prompt_too_long", message, field="prompt")
    return prompt


def _mode(value: object) -> Mode:
    if value not in MODES:
        shown = value[:40] if isinstance(value, str) else _kind(value)
        raise ProtocolError("unknown_mode", f"mode: unknown mode {shown!r}; expected one of {', '.join(MODES)}",
                            field="mode")
    return value


def _kind(value: object) -> str:
    """A JSON value's kind, as a client would name it."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(value), type(value).__name__)
