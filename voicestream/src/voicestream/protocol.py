"""The TTS wire protocol: one definition, shared by the Kokoro server and every client.

Two routes speak it (see docs/protocol.md for the prose and an example transcript):

* ``POST /invocations``: one JSON request (:class:`SynthesisRequest`), audio streamed back as raw
  bytes or as Server-Sent Events.
* ``WS /invocations-bidirectional-stream``: many JSON client messages (:data:`ClientMessage`) in,
  JSON control frames and binary audio frames out.

Everything here is pure data and validation, so both sides agree on what is valid and every
rejection names the field at fault.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final, Literal, Union

PROTOCOL_VERSION: Final = 1
NATIVE_SAMPLE_RATE: Final = 24_000
FORMATS: Final = ("pcm", "wav", "mp3", "opus", "aac", "flac")
TRANSPORTS: Final = ("binary", "sse")
# Output rates a client may ask for; Kokoro speaks at 24 kHz and the server resamples.
SAMPLE_RATES: Final = (8_000, 16_000, 22_050, 24_000, 44_100, 48_000)
SPEED_MIN: Final = 0.5  # below this Kokoro's duration predictor drawls into noise
SPEED_MAX: Final = 2.0  # above this words run together
# One message's text. Long enough for several paragraphs; the server cuts it into sentences.
MAX_TEXT_CHARS: Final = 10_000
# One utterance id / voice name: identifiers, not payloads.
MAX_ID_CHARS: Final = 128
# One incoming WebSocket frame. A frame over this gets an error frame; the session stays open.
MAX_FRAME_BYTES: Final = 64 * 1024

Format = Literal["pcm", "wav", "mp3", "opus", "aac", "flac"]
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


# ---------------------------------------------------------------------------------------------
# Field validators: each raises ProtocolError("invalid_field", ..., field=name).


def _invalid(name: str, message: str) -> ProtocolError:
    return ProtocolError("invalid_field", f"{name}: {message}", field=name)


def check_text(value: object, *, name: str = "text", allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _invalid(name, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise _invalid(name, "must not be empty or whitespace")
    if len(value) > MAX_TEXT_CHARS:
        raise ProtocolError(
            "text_too_long",
            f"{name}: {len(value)} characters is over the limit of {MAX_TEXT_CHARS}",
            field=name,
        )
    return value


def check_speed(value: object, *, name: str = "speed") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _invalid(name, f"must be a number, got {type(value).__name__}")
    try:
        speed = float(value)
    except OverflowError:  # an integer too large for a float (JSON allows any length): out of range
        speed = math.inf
    if not math.isfinite(speed) or not SPEED_MIN <= speed <= SPEED_MAX:
        raise _invalid(name, f"must be between {SPEED_MIN} and {SPEED_MAX}, got {value!r}")
    return speed


def check_identifier(value: object, *, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise _invalid(name, "must be a non-empty string")
    if len(value) > MAX_ID_CHARS:
        raise _invalid(name, f"must be at most {MAX_ID_CHARS} characters")
    return value


def check_format(value: object, *, name: str = "format") -> Format:
    if value not in FORMATS:
        raise _invalid(name, f"must be one of {', '.join(FORMATS)}, got {value!r}")
    return value  # type: ignore[return-value]


def check_sample_rate(value: object, *, name: str = "sample_rate") -> int:
    if isinstance(value, bool) or value not in SAMPLE_RATES:
        rates = ", ".join(str(r) for r in SAMPLE_RATES)
        raise _invalid(name, f"must be one of {rates}, got {value!r}")
    return int(value)  # type: ignore[arg-type]


def check_transport(value: object, *, name: str = "transport") -> Transport:
    if value not in TRANSPORTS:
        raise _invalid(name, f"must be one of {', '.join(TRANSPORTS)}, got {value!r}")
    return value  # type: ignore[return-value]


def _reject_unknown(payload: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise ProtocolError(
            "invalid_field", f"{unknown[0]}: not a field of {where}", field=unknown[0]
        )


# ---------------------------------------------------------------------------------------------
# POST /invocations


@dataclass(frozen=True, kw_only=True)
class SynthesisRequest:
    """One ``POST /invocations`` body. Unset voice means the server's default voice."""

    text: str
    voice: str | None = None
    speed: float = 1.0
    format: Format = "pcm"
    sample_rate: int = NATIVE_SAMPLE_RATE
    transport: Transport = "binary"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "speed": self.speed,
            "format": self.format,
            "sample_rate": self.sample_rate,
            "transport": self.transport,
        }
        if self.voice is not None:
            out["voice"] = self.voice
        return out


_REQUEST_FIELDS = frozenset({"text", "voice", "speed", "format", "sample_rate", "transport"})


def parse_request(raw: bytes | str) -> SynthesisRequest:
    """Parse and validate a ``POST /invocations`` body."""
    payload = _load_object(raw)
    _reject_unknown(payload, _REQUEST_FIELDS, "the request")
    if "text" not in payload:
        raise ProtocolError("invalid_field", "text: is required", field="text")
    return SynthesisRequest(
        text=check_text(payload["text"]),
        voice=check_identifier(payload["voice"], name="voice") if "voice" in payload else None,
        speed=check_speed(payload.get("speed", 1.0)),
        format=check_format(payload.get("format", "pcm")),
        sample_rate=check_sample_rate(payload.get("sample_rate", NATIVE_SAMPLE_RATE)),
        transport=check_transport(payload.get("transport", "binary")),
    )


# ---------------------------------------------------------------------------------------------
# WS /invocations-bidirectional-stream: client -> server


@dataclass(frozen=True, kw_only=True)
class Configure:
    """Session settings; later turns inherit them. Unset fields keep their current value."""

    voice: str | None = None
    speed: float | None = None
    format: Format | None = None
    sample_rate: int | None = None


@dataclass(frozen=True, kw_only=True)
class Speak:
    """A whole sentence (or more) to speak as one utterance; ``legacy`` marks the AWS sample's shape."""

    text: str
    id: str | None = None
    voice: str | None = None
    speed: float | None = None
    legacy: bool = False


@dataclass(frozen=True, kw_only=True)
class Delta:
    """A raw token delta; the server cuts the running text into sentences itself."""

    text: str


@dataclass(frozen=True, kw_only=True)
class Flush:
    """End of turn: speak what the deltas left, then answer ``turn_end`` after the turn's last audio."""


@dataclass(frozen=True, kw_only=True)
class Cancel:
    """Barge-in: drop the turn's queued work and stop its audio."""


@dataclass(frozen=True, kw_only=True)
class Close:
    """End the session."""


@dataclass(frozen=True, kw_only=True)
class Ping:
    """Application-level keep-alive for transports that hide WebSocket pings."""


ClientMessage = Union[Configure, Speak, Delta, Flush, Cancel, Close, Ping]

_FIELDS: dict[str, frozenset[str]] = {
    "configure": frozenset({"type", "voice", "speed", "format", "sample_rate"}),
    "speak": frozenset({"type", "text", "id", "voice", "speed"}),
    "delta": frozenset({"type", "text"}),
    "flush": frozenset({"type"}),
    "cancel": frozenset({"type"}),
    "close": frozenset({"type"}),
    "ping": frozenset({"type"}),
}
_LEGACY_FIELDS = frozenset({"text", "voice", "speed", "request_id"})
MESSAGE_TYPES: Final = tuple(_FIELDS)


def parse_client_message(raw: bytes | str) -> ClientMessage:
    """Parse one WebSocket frame (text, or binary holding UTF-8 JSON) into a typed message.

    A refusal carries the message's own id (``id``, or the legacy ``request_id``) when it has a
    usable one, so the error frame can name the utterance it refuses.
    """
    payload = _load_frame(raw)
    try:
        return _parse_payload(payload)
    except ProtocolError as exc:
        claimed = payload.get("id", payload.get("request_id"))
        if isinstance(claimed, str) and 0 < len(claimed) <= MAX_ID_CHARS:
            exc.id = claimed
        raise


def _load_frame(raw: bytes | str) -> dict[str, Any]:
    if isinstance(raw, (bytes, bytearray)) and len(raw) > MAX_FRAME_BYTES:
        raise ProtocolError(
            "frame_too_large", f"frame of {len(raw)} bytes is over {MAX_FRAME_BYTES} bytes"
        )
    if isinstance(raw, str) and len(raw.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES:
        raise ProtocolError("frame_too_large", f"frame is over {MAX_FRAME_BYTES} bytes")
    return _load_object(raw)


def _parse_payload(payload: dict[str, Any]) -> ClientMessage:
    kind = payload.get("type")
    if kind is None and "text" in payload:  # the AWS sample's {"text", "voice", "speed", "request_id"}
        _reject_unknown(payload, _LEGACY_FIELDS, "a synthesis request")
        return Speak(
            text=check_text(payload["text"]),
            id=_optional_id(payload, "request_id"),
            voice=_optional_id(payload, "voice"),
            speed=check_speed(payload["speed"]) if "speed" in payload else None,
            legacy=True,
        )
    if not isinstance(kind, str):
        raise ProtocolError("invalid_field", "type: is required and must be a string", field="type")
    if kind not in _FIELDS:
        raise ProtocolError(
            "unknown_type",
            f"type: unknown message type {kind[:40]!r}; expected one of {', '.join(MESSAGE_TYPES)}",
            field="type",
        )
    _reject_unknown(payload, _FIELDS[kind], f"a {kind!r} message")
    if kind == "configure":
        return Configure(
            voice=_optional_id(payload, "voice"),
            speed=check_speed(payload["speed"]) if "speed" in payload else None,
            format=check_format(payload["format"]) if "format" in payload else None,
            sample_rate=(
                check_sample_rate(payload["sample_rate"]) if "sample_rate" in payload else None
            ),
        )
    if kind == "speak":
        if "text" not in payload:
            raise ProtocolError("invalid_field", "text: is required", field="text")
        return Speak(
            text=check_text(payload["text"]),
            id=_optional_id(payload, "id"),
            voice=_optional_id(payload, "voice"),
            speed=check_speed(payload["speed"]) if "speed" in payload else None,
        )
    if kind == "delta":
        if "text" not in payload:
            raise ProtocolError("invalid_field", "text: is required", field="text")
        return Delta(text=check_text(payload["text"], allow_empty=True))
    return {"flush": Flush, "cancel": Cancel, "close": Close, "ping": Ping}[kind]()


def _optional_id(payload: dict[str, Any], name: str) -> str | None:
    return check_identifier(payload[name], name=name) if name in payload else None


def _load_object(raw: bytes | str) -> dict[str, Any]:
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("invalid_json", f"not UTF-8 text: {exc.reason} at byte {exc.start}")
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError("invalid_json", f"not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ProtocolError("invalid_json", f"expected a JSON object, got {type(payload).__name__}")
    return payload


def encode_client_message(message: ClientMessage) -> str:
    """Serialize a client message; the inverse of :func:`parse_client_message`."""
    if isinstance(message, Speak) and message.legacy:
        legacy = {"text": message.text, "request_id": message.id, "voice": message.voice}
        if message.speed is not None:
            legacy["speed"] = message.speed  # type: ignore[assignment]
        return json.dumps({k: v for k, v in legacy.items() if v is not None})
    kind = {
        Configure: "configure", Speak: "speak", Delta: "delta", Flush: "flush",
        Cancel: "cancel", Close: "close", Ping: "ping",
    }[type(message)]
    body: dict[str, Any] = {"type": kind}
    for name, value in vars(message).items():
        if value is not None and name != "legacy":
            body[name] = value
    return json.dumps(body)


# ---------------------------------------------------------------------------------------------
# Server -> client control frames (binary frames carry audio of the utterance last started).

SERVER_EVENT_TYPES: Final = (
    "configured",      # settings now in force, voices, limits
    "utterance_start",  # {id, turn, text}: binary audio frames of this id follow
    "utterance_end",    # {id, turn, audio_ms, synthesis_ms, bytes}
    "turn_end",         # {turn, utterances, audio_ms}: after the turn's last audio
    "cancelled",        # {turn, ids}: nothing of these ids follows
    "error",            # {code, message, field?, id?}
    "pong",
    "synthesis_start",     # AWS sample shape: {request_id}
    "synthesis_complete",  # AWS sample shape: {request_id, ...}
)


@dataclass(frozen=True, kw_only=True)
class SessionSettings:
    """What a session speaks with; every utterance inherits it unless the message overrides."""

    voice: str
    speed: float = 1.0
    format: Format = "pcm"
    sample_rate: int = NATIVE_SAMPLE_RATE

    def to_json(self) -> dict[str, Any]:
        return {
            "voice": self.voice,
            "speed": self.speed,
            "format": self.format,
            "sample_rate": self.sample_rate,
        }
