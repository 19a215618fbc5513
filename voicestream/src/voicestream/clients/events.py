"""Typed server events of the bidirectional protocol, as a client reads them.

The control events are the protocol's own (voicestream.protocol.events); a client adds only
:class:`AudioChunk`, a binary frame attributed to the utterance last started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from voicestream.protocol import (
    Cancelled,
    Configured,
    ErrorEvent,
    Pong,
    ProtocolError,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
    Words,
    WordTime,
    decode_event,
)
from voicestream.protocol import parse_event as _parse_event

from .errors import TtsProtocolError

__all__ = [
    "AudioChunk", "Cancelled", "Configured", "ErrorEvent", "Pong", "TtsEvent", "TurnEnd", "UtteranceEnd",
    "UtteranceStart", "WordTime", "Words", "decode_frame", "parse_event",
]


@dataclass(frozen=True, kw_only=True)
class AudioChunk:
    """One binary frame, attributed to the utterance last started (None if none had started)."""

    utterance_id: str | None
    data: bytes


TtsEvent = Union[
    Configured, UtteranceStart, Words, AudioChunk, UtteranceEnd, TurnEnd, Cancelled, Pong, ErrorEvent
]


def parse_event(frame: dict[str, Any]) -> TtsEvent | None:
    """One control frame as a typed event; None for a type this client does not know (newer server)."""
    try:
        return _parse_event(frame)  # type: ignore[return-value]
    except ProtocolError as exc:
        raise TtsProtocolError(exc.message) from None


def decode_frame(raw: str) -> TtsEvent | None:
    """One control frame's text as a typed event (None: unknown type); TtsProtocolError if malformed."""
    try:
        return decode_event(raw)  # type: ignore[return-value]
    except ProtocolError as exc:
        raise TtsProtocolError(exc.message) from None
