"""The AWS sample's message shape, translated at the protocol's edge.

The sample sends ``{"text", "voice"?, "speed"?, "request_id"?}`` (no ``type``) and expects
``synthesis_start`` / ``synthesis_complete`` keyed by ``request_id``. Inside, such a message is a
plain :class:`Speak` and its answers plain utterance events: ``edge.ServerEdge`` remembers,
per connection, which utterances came in the sample's shape and writes their answers back in it,
so nothing past the edge knows about the sample.
"""

from __future__ import annotations

from typing import Any, Final

from .events import ServerEvent, UtteranceEnd, UtteranceStart
from .fields import optional_id, optional_speed, reject_unknown, required_text
from .messages import Speak

SAMPLE_FIELDS: Final = frozenset({"text", "voice", "speed", "request_id"})


def is_sample_request(payload: dict[str, Any]) -> bool:
    return payload.get("type") is None and "text" in payload


def speak_from_sample(payload: dict[str, Any]) -> Speak:
    reject_unknown(payload, SAMPLE_FIELDS, "a synthesis request")
    return Speak(
        text=required_text(payload), id=optional_id(payload, "request_id"),
        voice=optional_id(payload, "voice"), speed=optional_speed(payload), legacy=True,
    )


def sample_from_speak(message: Speak) -> dict[str, Any]:
    out: dict[str, Any] = {"text": message.text, "request_id": message.id, "voice": message.voice,
                           "speed": message.speed}
    return {k: v for k, v in out.items() if v is not None}


def sample_frame(event: UtteranceStart | UtteranceEnd) -> dict[str, Any]:
    """An utterance event as the sample's ``synthesis_start`` / ``synthesis_complete``."""
    if isinstance(event, UtteranceStart):
        return {"type": "synthesis_start", "request_id": event.id}
    frame = {k: v for k, v in event.to_wire().items() if k not in ("type", "id", "turn")}
    return {"type": "synthesis_complete", "request_id": event.id, **frame}


def event_from_sample(frame: dict[str, Any]) -> ServerEvent | None:
    """The sample's answers read back as utterance events (``turn`` None); None if not one."""
    kind = frame.get("type")
    if kind not in ("synthesis_start", "synthesis_complete"):
        return None
    native = {k: v for k, v in frame.items() if k not in ("type", "request_id")}
    native["id"] = frame.get("request_id", "")
    native.pop("turn", None)
    cls = UtteranceStart if kind == "synthesis_start" else UtteranceEnd
    return cls.from_wire(native)
