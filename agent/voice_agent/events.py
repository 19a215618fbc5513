"""What the agent sends a client (docs/agent.md#events): one frozen dataclass per event type.

Typed the way the TTS protocol's events are (:mod:`voicestream.protocol.events`): each class is
registered under its wire ``type`` in :data:`AGENT_EVENTS` and encodes itself with
:meth:`AgentEvent.to_wire`. Both transports carry these; the WebSocket sends audio as binary
frames, SSE as :class:`AudioData` events. Every event has ``t_ms`` (ms since its turn started, 0
outside a turn) and, inside a turn, ``turn``; the turn stamps both as it emits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Final

from voicestream.protocol import CHANNELS, NATIVE_SAMPLE_RATE, ProtocolError, ServerEvent, server_event

from .messages import MAX_MESSAGE_BYTES, MODES, Mode

PCM_FORMAT: Final = "pcm_s16le"  # the TTS server's pcm, passed on unchanged
AGENT_EVENTS: dict[str, type[ServerEvent]] = {}


@dataclass(frozen=True, kw_only=True)
class AgentEvent(ServerEvent):
    """Base of every event: ``turn`` and ``t_ms`` go last on the wire. Fields are sent as they are
    (``null`` included) except those in ``OMITTED_WHEN_NONE``, which only appear when set."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"turn"})
    turn: int | None = None
    t_ms: int = 0

    def to_wire(self) -> dict[str, Any]:
        names = [f.name for f in fields(self) if f.name not in ("turn", "t_ms")] + ["turn", "t_ms"]
        values = {name: getattr(self, name) for name in names}
        return {"type": self.TYPE, **{name: _plain(value) for name, value in values.items()
                                      if value is not None or name not in self.OMITTED_WHEN_NONE}}

    def to_json(self) -> str:
        return json.dumps(self.to_wire())


@server_event("ready", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class Ready(AgentEvent):
    """WS only, once per connection: what answers, who speaks, and the audio's format."""

    model: str
    model_id: str
    offline_reason: str | None
    tts: str
    voice: str | None
    max_prompt_chars: int
    modes: tuple[str, ...] = MODES
    format: str = PCM_FORMAT
    sample_rate: int = NATIVE_SAMPLE_RATE
    channels: int = CHANNELS
    max_message_bytes: int = MAX_MESSAGE_BYTES
    voices: tuple[str, ...] = ()
    languages: dict[str, str] = field(default_factory=dict)  # the TTS server's, code -> name


@server_event("start", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class TurnStart(AgentEvent):
    """A turn began; ``voice`` None: the TTS server's default."""

    mode: Mode
    voice: str | None
    lang: str | None = None  # None: the voice's own language
    format: str = PCM_FORMAT
    sample_rate: int = NATIVE_SAMPLE_RATE
    channels: int = CHANNELS


@server_event("text", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class TextDelta(AgentEvent):
    """A delta of the agent's answer, as the model writes it."""

    text: str


@server_event("sentence", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class Sentence(AgentEvent):
    """A piece handed to the TTS session (1-based ``index``)."""

    index: int
    text: str


@dataclass(frozen=True, kw_only=True)
class TimedWord:
    """One word on the turn's audio clock."""

    text: str
    start_ms: int
    end_ms: int


@server_event("words", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class TurnWords(AgentEvent):
    """Before the audio of an utterance: its words, timed on the turn's audio clock."""

    utterance_id: str
    words: tuple[TimedWord, ...]


@server_event("audio", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class AudioData(AgentEvent):
    """SSE only: one PCM chunk, base64 in ``audio``; on WS it is a binary frame instead."""

    seq: int
    utterance_id: str | None
    bytes: int
    audio: str


@server_event("first_audio", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class FirstAudio(AgentEvent):
    """The turn's first audio chunk leaves now: ``t_ms`` is the agent-side time to first audio."""


@server_event("text_end", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class TextEnd(AgentEvent):
    """The model finished writing: the whole answer."""

    text: str
    stop_reason: str | None


@server_event("interrupted", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class Interrupted(AgentEvent):
    """Barge-in done: nothing more of the turn follows but ``end``. After the turn's end (the
    listener stopped audio still playing) ``after_end`` and ``heard_ms`` say so."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"turn", "after_end", "heard_ms"})
    after_end: bool | None = None
    heard_ms: int | None = None


@server_event("error", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class AgentError(AgentEvent):
    """Bad input, a TTS failure, a model failure; ``field`` names the field at fault."""

    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"turn", "field"})
    code: str
    message: str
    field: str | None = None

    @classmethod
    def of(cls, exc: ProtocolError) -> AgentError:
        """The event of a refused request."""
        return cls(code=exc.code, message=exc.message, field=exc.field)


@server_event("end", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class TurnSummary(AgentEvent):
    """The turn is over: its totals."""

    mode: Mode
    interrupted: bool
    text_chars: int
    sentences: int
    audio_chunks: int
    audio_bytes: int
    audio_ms: int
    ttfa_ms: int | None
    text_ms: int | None
    tts_ok: bool
    stop_reason: str | None
    heard_ms: int | None


@server_event("interrupt_sent", registry=AGENT_EVENTS)
@dataclass(frozen=True, kw_only=True)
class InterruptSent(AgentEvent):
    """SSE only: the answer to an interrupt request."""


def _plain(value: Any) -> Any:
    """JSON-ready: a nested dataclass as a dict, a tuple as a list."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value


# Events that still leave a turn after its interrupt (all others of the turn are dropped).
CLOSING_EVENTS: Final = (Interrupted, AgentError, TurnSummary)
