"""What clients send: the ``POST /invocations`` body and the WebSocket's client messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Union

from .audio import NATIVE_SAMPLE_RATE, Format, check_format, check_sample_rate
from .fields import (
    ProtocolError,
    Transport,
    check_bool,
    check_identifier,
    check_ids,
    check_speed,
    check_text,
    check_transport,
    optional_id,
    optional_speed,
    reject_unknown,
    required_text,
)
from .languages import optional_lang
from .normalization import NORMALIZE_ALL, Normalization, check_normalization

# ---- POST /invocations -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SynthesisRequest:
    """One ``POST /invocations`` body. Unset voice means the server's default voice."""

    text: str
    voice: str | None = None
    speed: float = 1.0
    format: Format = "pcm"
    sample_rate: int = NATIVE_SAMPLE_RATE
    transport: Transport = "binary"
    timestamps: bool = False  # SSE only: a ``words`` event before the audio each one describes
    normalize: Normalization = NORMALIZE_ALL  # which text normalization rules apply (protocol.normalization)
    lang: str | None = None  # the G2P language (protocol.languages); None: the voice's

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
        if self.timestamps:
            out["timestamps"] = True
        if self.normalize != NORMALIZE_ALL:
            out["normalize"] = self.normalize.to_json()
        if self.lang is not None:
            out["lang"] = self.lang
        return out


_REQUEST_FIELDS = frozenset({
    "text", "voice", "speed", "format", "sample_rate", "transport", "timestamps", "normalize", "lang",
})


def request_from_payload(
    payload: dict[str, Any], *, fields: frozenset[str] = _REQUEST_FIELDS, default_format: str = "pcm",
) -> SynthesisRequest:
    """A POST body's request; ``fields`` are the ones its shape allows (the AWS sample's shape
    allows others and defaults to wav: protocol/aws.py)."""
    reject_unknown(payload, fields, "the request")
    return SynthesisRequest(
        text=required_text(payload),
        voice=check_identifier(payload["voice"], name="voice") if "voice" in payload else None,
        speed=check_speed(payload.get("speed", 1.0)),
        format=check_format(payload.get("format", default_format)),
        sample_rate=check_sample_rate(payload.get("sample_rate", NATIVE_SAMPLE_RATE)),
        transport=check_transport(payload.get("transport", "binary")),
        timestamps=check_bool(payload.get("timestamps", False), name="timestamps"),
        normalize=check_normalization(payload.get("normalize", True)),
        lang=optional_lang(payload),
    )


# ---- WS /invocations-bidirectional-stream: client -> server ----------------------------------


@dataclass(frozen=True, kw_only=True)
class Configure:
    """Session settings; later turns inherit them. Unset fields keep their current value."""

    voice: str | None = None
    speed: float | None = None
    format: Format | None = None
    sample_rate: int | None = None
    timestamps: bool | None = None  # True: a ``words`` event before the audio of each sentence
    normalize: Normalization | None = None  # which text normalization rules apply (protocol.normalization)
    lang: str | None = None  # the G2P language for later utterances (protocol.languages)


@dataclass(frozen=True, kw_only=True)
class Speak:
    """One piece of text the client has cut (a sentence, or an early clause), spoken as given as
    one utterance. One in the AWS sample's shape is an :class:`~voicestream.protocol.aws.SampleSpeak`."""

    text: str
    id: str | None = None
    voice: str | None = None
    speed: float | None = None
    lang: str | None = None  # this utterance's G2P language (protocol.languages)


@dataclass(frozen=True, kw_only=True)
class Delta:
    """A raw token delta; the server's chunker cuts the turn's running text into sentences."""

    text: str


@dataclass(frozen=True, kw_only=True)
class Flush:
    """End of turn: speak what the deltas left, then answer ``turn_end`` after the turn's last audio."""


@dataclass(frozen=True, kw_only=True)
class Cancel:
    """Barge-in: drop every open utterance (the turn's queued work) and stop its audio; with
    ``ids``, only the named utterances still open (the turn goes on)."""

    ids: tuple[str, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Close:
    """End the session."""


@dataclass(frozen=True, kw_only=True)
class Ping:
    """Application-level keep-alive for transports that hide WebSocket pings."""


ClientMessage = Union[Configure, Speak, Delta, Flush, Cancel, Close, Ping]

_TYPES: Final[dict[type, str]] = {
    Configure: "configure", Speak: "speak", Delta: "delta", Flush: "flush",
    Cancel: "cancel", Close: "close", Ping: "ping",
}
_FIELDS: Final[dict[str, frozenset[str]]] = {
    "configure": frozenset({"type", "voice", "speed", "format", "sample_rate", "timestamps", "normalize", "lang"}),
    "speak": frozenset({"type", "text", "id", "voice", "speed", "lang"}),
    "delta": frozenset({"type", "text"}),
    "flush": frozenset({"type"}),
    "cancel": frozenset({"type", "ids"}),
    "close": frozenset({"type"}),
    "ping": frozenset({"type"}),
}
MESSAGE_TYPES: Final = tuple(_FIELDS)


def message_from_payload(payload: dict[str, Any]) -> ClientMessage:
    """A typed message (one with ``type``) from its JSON object."""
    kind = payload.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("invalid_field", "type: is required and must be a string", field="type")
    if kind not in _FIELDS:
        raise ProtocolError(
            "unknown_type",
            f"type: unknown message type {kind[:40]!r}; expected one of {', '.join(MESSAGE_TYPES)}",
            field="type",
        )
    reject_unknown(payload, _FIELDS[kind], f"a {kind!r} message")
    if kind == "configure":
        return Configure(
            voice=optional_id(payload, "voice"),
            speed=optional_speed(payload),
            format=check_format(payload["format"]) if "format" in payload else None,
            sample_rate=check_sample_rate(payload["sample_rate"]) if "sample_rate" in payload else None,
            timestamps=check_bool(payload["timestamps"], name="timestamps") if "timestamps" in payload else None,
            normalize=check_normalization(payload["normalize"]) if "normalize" in payload else None,
            lang=optional_lang(payload),
        )
    if kind == "speak":
        return Speak(
            text=required_text(payload), id=optional_id(payload, "id"),
            voice=optional_id(payload, "voice"), speed=optional_speed(payload), lang=optional_lang(payload),
        )
    if kind == "delta":
        if "text" not in payload:
            raise ProtocolError("invalid_field", "text: is required", field="text")
        return Delta(text=check_text(payload["text"], allow_empty=True))
    if kind == "cancel":
        return Cancel(ids=check_ids(payload["ids"], name="ids") if "ids" in payload else None)
    bare: dict[str, type[Flush | Close | Ping]] = {"flush": Flush, "close": Close, "ping": Ping}
    return bare[kind]()


def message_to_payload(message: ClientMessage) -> dict[str, Any]:
    """The JSON object of a typed message; the inverse of :func:`message_from_payload`."""
    body: dict[str, Any] = {"type": _TYPES[type(message)]}
    for name, value in vars(message).items():
        if isinstance(value, Normalization):
            body[name] = value.to_json()
        elif value is not None:
            body[name] = list(value) if isinstance(value, tuple) else value
    return body


@dataclass(frozen=True, kw_only=True)
class SessionSettings:
    """What a session speaks with; every utterance inherits it unless the message overrides."""

    voice: str
    speed: float = 1.0
    format: Format = "pcm"
    sample_rate: int = NATIVE_SAMPLE_RATE
    timestamps: bool = False
    normalize: Normalization = NORMALIZE_ALL
    lang: str | None = None  # None: each voice's own language

    def to_json(self) -> dict[str, Any]:
        return {
            "voice": self.voice,
            "speed": self.speed,
            "format": self.format,
            "sample_rate": self.sample_rate,
            "timestamps": self.timestamps,
            "normalize": self.normalize.to_json(),
            "lang": self.lang,
        }
