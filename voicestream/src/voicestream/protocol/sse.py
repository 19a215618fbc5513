"""``POST /invocations`` with ``transport: "sse"``: its Server-Sent Events, typed both ways.

Each event is ``event: <name>`` and ``data: <JSON object>`` (the fields, without ``type``):
``start``, then ``audio`` per encoded chunk (base64), then ``end``; or ``error`` once synthesis
failed after the start.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .audio import NATIVE_SAMPLE_RATE
from .events import ErrorEvent, ServerEvent, Words, server_event
from .fields import ProtocolError

SSE_EVENTS: dict[str, type[ServerEvent]] = {"error": ErrorEvent}


@server_event("start", registry=SSE_EVENTS)
@dataclass(frozen=True, kw_only=True)
class SseStart(ServerEvent):
    """The request was accepted: what the audio will be."""

    id: str
    voice: str
    format: str = "pcm"
    sample_rate: int = NATIVE_SAMPLE_RATE


@server_event("audio", registry=SSE_EVENTS)
@dataclass(frozen=True, kw_only=True)
class SseAudio(ServerEvent):
    """One piece of the encoded audio stream, base64 in ``audio``."""

    index: int
    audio: str

    @classmethod
    def of(cls, *, index: int, data: bytes) -> SseAudio:
        return cls(index=index, audio=base64.b64encode(data).decode("ascii"))

    def data(self) -> bytes:
        try:
            return base64.b64decode(self.audio, validate=True)
        except (binascii.Error, ValueError):
            raise ProtocolError("invalid_event", "SSE audio event is not valid base64") from None


@server_event("end", registry=SSE_EVENTS)
@dataclass(frozen=True, kw_only=True)
class SseEnd(ServerEvent):
    """All audio was sent."""

    id: str
    chunks: int
    audio_ms: int
    synthesis_ms: int
    elapsed_ms: int
    first_audio_synthesis_ms: int = 0  # the part of synthesis_ms before the first audio event


@server_event("words", registry=SSE_EVENTS)
@dataclass(frozen=True, kw_only=True)
class SseWords(Words):
    """With ``timestamps: true``: the words of the audio events that follow (times from the start
    of the response's audio, offsets into the request's text)."""


def sse_frame(data: Mapping[str, Any], *, event: str | None = None) -> bytes:
    """One Server-Sent Event: an ``event:`` line when named, one ``data:`` line of JSON. The one
    encoder for every SSE route (ours, the AWS sample's, OpenAI's, the agent's)."""
    named = f"event: {event}\n" if event is not None else ""
    return f"{named}data: {json.dumps(data)}\n\n".encode()


def encode_sse(event: SseStart | SseAudio | SseEnd | SseWords | ErrorEvent) -> bytes:
    name = next(n for n, cls in SSE_EVENTS.items() if cls is type(event))
    return sse_frame({k: v for k, v in event.to_wire().items() if k != "type"}, event=name)


def parse_sse(name: str, data: str) -> ServerEvent | None:
    """One event's name and data text as a typed event; None for a name this side does not know."""
    try:
        payload: Any = json.loads(data) if data else {}
    except ValueError:
        raise ProtocolError("invalid_event", f"SSE {name!r} event data is not JSON") from None
    if not isinstance(payload, dict):
        raise ProtocolError("invalid_event", f"SSE {name!r} event data is not a JSON object")
    cls = SSE_EVENTS.get(name)
    return cls.from_wire(payload) if cls is not None else None
