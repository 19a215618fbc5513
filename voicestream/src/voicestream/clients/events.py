"""Typed server events of the bidirectional protocol, parsed from its JSON control frames."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .errors import TtsProtocolError


@dataclass(frozen=True, kw_only=True)
class Configured:
    """Settings now in force, with the server's voices and limits."""

    voice: str
    speed: float
    format: str
    sample_rate: int
    voices: tuple[str, ...] = ()
    limits: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class UtteranceStart:
    """Audio frames of ``id`` follow. ``turn`` is None for the legacy AWS-sample shape."""

    id: str
    turn: int | None
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class AudioChunk:
    """One binary frame, attributed to the utterance last started (None if none had started)."""

    utterance_id: str | None
    data: bytes


@dataclass(frozen=True, kw_only=True)
class UtteranceEnd:
    """The last audio of ``id`` has been sent."""

    id: str
    turn: int | None
    audio_ms: int = 0
    synthesis_ms: int = 0
    bytes: int = 0
    format: str = "pcm"
    sample_rate: int = 24_000


@dataclass(frozen=True, kw_only=True)
class TurnEnd:
    """All audio of the turn (ended by ``flush``) has been sent."""

    turn: int
    utterances: int
    audio_ms: int


@dataclass(frozen=True, kw_only=True)
class Cancelled:
    """Nothing more of ``ids`` will be sent."""

    turn: int
    ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Pong:
    """Answer to ``ping``."""


@dataclass(frozen=True, kw_only=True)
class ErrorEvent:
    """A server ``error`` frame, yielded instead of raised when the session has ``raise_errors=False``."""

    code: str
    message: str
    field: str | None = None
    id: str | None = None


TtsEvent = Union[
    Configured, UtteranceStart, AudioChunk, UtteranceEnd, TurnEnd, Cancelled, Pong, ErrorEvent
]


def _int(frame: dict[str, Any], name: str, default: int = 0) -> int:
    value = frame.get(name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _opt_int(frame: dict[str, Any], name: str) -> int | None:
    value = frame.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _end(frame: dict[str, Any], uid: str) -> UtteranceEnd:
    return UtteranceEnd(
        id=uid,
        turn=_opt_int(frame, "turn"),
        audio_ms=_int(frame, "audio_ms"),
        synthesis_ms=_int(frame, "synthesis_ms"),
        bytes=_int(frame, "bytes"),
        format=str(frame.get("format", "pcm")),
        sample_rate=_int(frame, "sample_rate", 24_000),
    )


def parse_event(frame: dict[str, Any]) -> TtsEvent | None:
    """One control frame as a typed event; None for a type this client does not know (newer server)."""
    kind = frame.get("type")
    if kind == "utterance_start":
        return UtteranceStart(id=str(frame.get("id", "")), turn=_opt_int(frame, "turn"),
                              text=str(frame.get("text", "")))
    if kind == "utterance_end":
        return _end(frame, str(frame.get("id", "")))
    if kind == "synthesis_start":
        return UtteranceStart(id=str(frame.get("request_id", "")), turn=None)
    if kind == "synthesis_complete":
        return _end(frame, str(frame.get("request_id", "")))
    if kind == "turn_end":
        return TurnEnd(turn=_int(frame, "turn"), utterances=_int(frame, "utterances"),
                       audio_ms=_int(frame, "audio_ms"))
    if kind == "cancelled":
        ids = frame.get("ids")
        return Cancelled(turn=_int(frame, "turn"),
                         ids=tuple(str(i) for i in ids) if isinstance(ids, list) else ())
    if kind == "configured":
        voices = frame.get("voices")
        limits = frame.get("limits")
        speed = frame.get("speed", 1.0)
        return Configured(
            voice=str(frame.get("voice", "")),
            speed=float(speed) if isinstance(speed, (int, float)) else 1.0,
            format=str(frame.get("format", "pcm")),
            sample_rate=_int(frame, "sample_rate", 24_000),
            voices=tuple(str(v) for v in voices) if isinstance(voices, list) else (),
            limits=dict(limits) if isinstance(limits, dict) else {},
        )
    if kind == "pong":
        return Pong()
    if kind == "error":
        field_ = frame.get("field")
        uid = frame.get("id")
        return ErrorEvent(
            code=str(frame.get("code") or "error"),
            message=str(frame.get("message") or "no message"),
            field=field_ if isinstance(field_, str) else None,
            id=uid if isinstance(uid, str) else None,
        )
    if not isinstance(kind, str):
        raise TtsProtocolError(f"control frame without a type: {str(frame)[:200]}")
    return None
