"""What the server sends on the WebSocket: typed control events (JSON text frames), and close codes.

Binary frames carry audio of the utterance last started; everything else is one of the events
below. Each event class is registered under its wire ``type`` with :func:`server_event`, encodes
itself with :meth:`ServerEvent.to_wire` (fields in order, ``None`` left out) and is read back
leniently by :meth:`ServerEvent.from_wire`, so an older client survives a newer server. A new
event is one decorated frozen dataclass; one with nested fields overrides ``from_wire``.
"""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Final, TypeVar, Union

from .audio import NATIVE_SAMPLE_RATE
from .fields import PROTOCOL_VERSION


class CloseCode:
    """WebSocket close codes of ``/invocations-bidirectional-stream`` (docs/protocol.md#close-codes)."""

    NORMAL: Final = 1000  # after the client's `close`
    GOING_AWAY: Final = 1001  # the server is stopping (SIGTERM): reconnect and send again what was not spoken
    TOO_BIG: Final = 1009  # a frame over 1 MiB (the server's WebSocket layer)
    BUSY: Final = 1013  # RFC 6455 "Try Again Later": at the session limit, after a `busy` error
    IDLE: Final = 4001  # no message and nothing to speak for the idle timeout
    STALLED: Final = 4002  # the client read nothing for the send timeout while audio waited


E = TypeVar("E", bound="ServerEvent")
EVENTS: dict[str, type[ServerEvent]] = {}
_HINTS: dict[type, dict[str, Any]] = {}


def server_event(
    name: str, *, registry: dict[str, type[ServerEvent]] | None = None
) -> typing.Callable[[type[E]], type[E]]:
    """Register an event class under its wire ``type`` (in EVENTS, the WebSocket's, by default)."""

    def register(cls: type[E]) -> type[E]:
        cls.TYPE = name
        (EVENTS if registry is None else registry)[name] = cls
        return cls

    return register


@dataclass(frozen=True, kw_only=True)
class ServerEvent:
    """Base of every control event."""

    TYPE: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.TYPE, **_plain(self)}

    @classmethod
    def from_wire(cls: type[E], frame: dict[str, Any]) -> E:
        """Lenient: a missing or mistyped field takes its default (or its type's zero)."""
        hints = _HINTS.get(cls)
        if hints is None:
            hints = _HINTS[cls] = typing.get_type_hints(cls)
        values = {f.name: _coerce(hints[f.name], frame.get(f.name), f) for f in fields(cls)}
        return cls(**values)


def _plain(value: Any) -> Any:
    """JSON-ready: a dataclass as its fields (``None`` left out), a tuple as a list, nested too."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(v) for f in fields(value) if (v := getattr(value, f.name)) is not None}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _coerce(hint: Any, value: Any, f: Any) -> Any:
    default = f.default if f.default is not MISSING else (
        f.default_factory() if f.default_factory is not MISSING else None)
    optional = typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint)
    if optional:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    base = typing.get_origin(hint) or hint
    if base is bool:
        return value if isinstance(value, bool) else bool(default)
    if base is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return value if ok else (default if default is not None or optional else 0)
    if base is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok else (default if default is not None or optional else 0.0)
    if base is str:
        if optional:
            return value if isinstance(value, str) else default
        return str(value) if value is not None else (default if default is not None else "")
    if base is tuple:
        return tuple(str(v) for v in value) if isinstance(value, list) else (default or ())
    if base is dict:
        return dict(value) if isinstance(value, dict) else (default or {})
    return value if value is not None else default


@server_event("configured")
@dataclass(frozen=True, kw_only=True)
class Configured(ServerEvent):
    """Settings now in force, with the server's voices and limits."""

    protocol_version: int = PROTOCOL_VERSION
    voice: str
    speed: float = 1.0
    format: str = "pcm"
    sample_rate: int = NATIVE_SAMPLE_RATE
    timestamps: bool = False
    normalize: bool | dict[str, bool] = True  # the normalization rules in force (protocol.normalization)
    lang: str | None = None  # the G2P language in force; None: each voice's own (protocol.languages)
    voices: tuple[str, ...] = ()
    languages: dict[str, str] = field(default_factory=dict)  # the languages served: code -> name
    limits: dict[str, Any] = field(default_factory=dict)


@server_event("utterance_start")
@dataclass(frozen=True, kw_only=True)
class UtteranceStart(ServerEvent):
    """Audio frames of ``id`` follow. ``turn`` is None for the AWS sample's shape."""

    id: str
    turn: int | None
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class WordTime:
    """One spoken word: its audio [start_ms, end_ms) from the start of its utterance's audio, and
    its [char_start, char_end) in the utterance's text as the client sent it."""

    text: str
    start_ms: int
    end_ms: int
    char_start: int
    char_end: int

    @classmethod
    def from_wire(cls, item: object) -> WordTime | None:
        if not isinstance(item, dict):
            return None
        ints = [v for k in ("start_ms", "end_ms", "char_start", "char_end")
                if isinstance(v := item.get(k), int) and not isinstance(v, bool)]
        text = item.get("text")
        if not isinstance(text, str) or len(ints) != 4:
            return None
        return cls(text=text, start_ms=ints[0], end_ms=ints[1], char_start=ints[2], char_end=ints[3])


@server_event("words")
@dataclass(frozen=True, kw_only=True)
class Words(ServerEvent):
    """Sent (with ``configure`` ``timestamps: true``) before the audio the words are spoken in."""

    id: str
    words: tuple[WordTime, ...] = ()

    @classmethod
    def from_wire(cls, frame: dict[str, Any]) -> Words:
        items = frame.get("words")
        parsed = [WordTime.from_wire(i) for i in items] if isinstance(items, list) else []
        return cls(id=str(frame.get("id") or ""), words=tuple(w for w in parsed if w is not None))


@server_event("utterance_end")
@dataclass(frozen=True, kw_only=True)
class UtteranceEnd(ServerEvent):
    """The last audio of ``id`` has been sent."""

    id: str
    turn: int | None
    audio_ms: int = 0
    synthesis_ms: int = 0
    first_audio_synthesis_ms: int = 0  # the part of synthesis_ms before the first audio (its first window)
    bytes: int = 0
    format: str = "pcm"
    sample_rate: int = NATIVE_SAMPLE_RATE


@server_event("turn_end")
@dataclass(frozen=True, kw_only=True)
class TurnEnd(ServerEvent):
    """All audio of the turn (ended by ``flush``) has been sent."""

    turn: int
    utterances: int
    audio_ms: int


@server_event("cancelled")
@dataclass(frozen=True, kw_only=True)
class Cancelled(ServerEvent):
    """Nothing more of ``ids`` will be sent."""

    turn: int
    ids: tuple[str, ...]


@server_event("pong")
@dataclass(frozen=True, kw_only=True)
class Pong(ServerEvent):
    """Answer to ``ping``."""


@server_event("error")
@dataclass(frozen=True, kw_only=True)
class ErrorEvent(ServerEvent):
    """A refused message or a failed utterance (``id`` set); the session stays open."""

    code: str
    message: str
    field: str | None = None
    id: str | None = None

    @classmethod
    def from_wire(cls, frame: dict[str, Any]) -> ErrorEvent:
        name, uid = frame.get("field"), frame.get("id")
        return cls(
            code=str(frame.get("code") or "error"),
            message=str(frame.get("message") or "no message"),
            field=name if isinstance(name, str) else None,
            id=uid if isinstance(uid, str) else None,
        )


SERVER_EVENT_TYPES: Final = (*EVENTS, "synthesis_start", "synthesis_complete")
