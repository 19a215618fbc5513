"""Limits, the refusal type, and one validator per field: every rejection names the field at fault."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final, Literal

PROTOCOL_VERSION: Final = 1
TRANSPORTS: Final = ("binary", "sse")
SPEED_MIN: Final = 0.5  # below this Kokoro's duration predictor drawls into noise
SPEED_MAX: Final = 2.0  # above this words run together
# One message's text. Long enough for several paragraphs.
MAX_TEXT_CHARS: Final = 10_000
# One utterance id / voice name: identifiers, not payloads.
MAX_ID_CHARS: Final = 128
# Ids one ``cancel`` may name: more than a session can have open (its queue limit's ceiling).
MAX_IDS: Final = 256
# One incoming WebSocket frame. A frame over this gets an error frame; the session stays open.
MAX_FRAME_BYTES: Final = 64 * 1024

Transport = Literal["binary", "sse"]


class ProtocolError(ValueError):
    """A message or request the server refuses. ``code`` is machine-readable, ``field`` names the culprit."""

    def __init__(self, code: str, message: str, *, field: str | None = None, id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.id = id  # the utterance the refused message named, so a client can match the error

    def to_dict(self, *, id: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "error", "code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
        if (id or self.id) is not None:
            out["id"] = id or self.id
        return out


def invalid(name: str, message: str) -> ProtocolError:
    return ProtocolError("invalid_field", f"{name}: {message}", field=name)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: object, *, name: str = "text", allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise invalid(name, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise invalid(name, "must not be empty or whitespace")
    bad = _LONE_SURROGATE.search(value)
    if bad is not None:  # JSON's "\ud800" escapes decode to lone surrogates: not text, nothing can speak it
        raise invalid(name, f"holds a lone UTF-16 surrogate at character {bad.start()}, which is not text")
    if len(value) > MAX_TEXT_CHARS:
        raise ProtocolError(
            "text_too_long",
            f"{name}: {len(value)} characters is over the limit of {MAX_TEXT_CHARS}",
            field=name,
        )
    return check_unicode(value, name=name)


def check_unicode(value: str, *, name: str) -> str:
    """JSON can carry ``"\\ud800"`` alone; no tokenizer, codec or header can take it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise invalid(name, f"holds an unpaired UTF-16 surrogate at character {exc.start}: not valid Unicode") from None
    return value


def check_speed(value: object, *, name: str = "speed", low: float = SPEED_MIN, high: float = SPEED_MAX) -> float:
    """A speed within ``low``-``high`` (the protocol's range; OpenAI's route allows its own)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(name, f"must be a number, got {type(value).__name__}")
    try:
        speed = float(value)
    except OverflowError:  # an integer too large for a float (JSON allows any length): out of range
        speed = math.inf
    if not math.isfinite(speed) or not low <= speed <= high:
        raise invalid(name, f"must be between {low} and {high}, got {value!r}")
    return speed


def check_identifier(value: object, *, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(name, "must be a non-empty string")
    if len(value) > MAX_ID_CHARS:
        raise invalid(name, f"must be at most {MAX_ID_CHARS} characters")
    return check_unicode(value, name=name)


def check_ids(value: object, *, name: str) -> tuple[str, ...]:
    """A list of utterance ids (``cancel``'s ``ids``): at most MAX_IDS, each an identifier."""
    if not isinstance(value, list) or not value:
        raise invalid(name, "must be a non-empty list of utterance ids")
    if len(value) > MAX_IDS:
        raise invalid(name, f"must list at most {MAX_IDS} ids, got {len(value)}")
    return tuple(check_identifier(item, name=name) for item in value)


def check_transport(value: object, *, name: str = "transport") -> Transport:
    if value not in TRANSPORTS:
        raise invalid(name, f"must be one of {', '.join(TRANSPORTS)}, got {value!r}")
    return value


def check_bool(value: object, *, name: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(name, f"must be true or false, got {value!r}")
    return value


def check_timestamp(value: object, *, name: str = "request_timestamp") -> float:
    """Epoch seconds (the AWS sample stamps each request with the time it was sent)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise invalid(name, f"must be epoch seconds (a number), got {value!r}")
    return float(value)


def optional_id(payload: dict[str, Any], name: str) -> str | None:
    return check_identifier(payload[name], name=name) if name in payload else None


def optional_speed(payload: dict[str, Any]) -> float | None:
    return check_speed(payload["speed"]) if "speed" in payload else None


def required_text(payload: dict[str, Any]) -> str:
    if "text" not in payload:
        raise ProtocolError("invalid_field", "text: is required", field="text")
    return check_text(payload["text"])


def reject_unknown(payload: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise ProtocolError("invalid_field", f"{unknown[0]}: not a field of {where}", field=unknown[0])


def load_object(raw: bytes | str) -> dict[str, Any]:
    """One JSON object from a frame or body, or ``invalid_json``."""
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("invalid_json", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError("invalid_json", f"not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ProtocolError("invalid_json", f"expected a JSON object, got {type(payload).__name__}")
    return payload
