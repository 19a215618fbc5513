"""Bytes to typed messages and back: the one encode and the one parse of each direction."""

from __future__ import annotations

import json
from typing import Any

from . import aws
from .events import EVENTS, ServerEvent
from .fields import MAX_FRAME_BYTES, MAX_ID_CHARS, ProtocolError, load_object
from .messages import (
    ClientMessage,
    SynthesisRequest,
    message_from_payload,
    message_to_payload,
    request_from_payload,
)


def parse_request(raw: bytes | str) -> SynthesisRequest:
    """Parse and validate a ``POST /invocations`` body."""
    return request_from_payload(load_object(raw))


def parse_client_message(raw: bytes | str) -> ClientMessage:
    """Parse one WebSocket frame (text, or binary holding UTF-8 JSON) into a typed message.

    A refusal carries the message's own id (``id``, or the sample's ``request_id``) when it has a
    usable one, so the error frame can name the utterance it refuses.
    """
    payload = _load_frame(raw)
    try:
        if aws.is_sample_request(payload):
            return aws.speak_from_sample(payload)
        return message_from_payload(payload)
    except ProtocolError as exc:
        claimed = payload.get("id", payload.get("request_id"))
        if isinstance(claimed, str) and 0 < len(claimed) <= MAX_ID_CHARS:
            exc.id = claimed
        raise


def encode_client_message(message: ClientMessage) -> str:
    """Serialize a client message; the inverse of :func:`parse_client_message`."""
    if isinstance(message, aws.SampleSpeak):
        return json.dumps(aws.sample_from_speak(message))
    return json.dumps(message_to_payload(message))


def _load_frame(raw: bytes | str) -> dict[str, Any]:
    if isinstance(raw, (bytes, bytearray)) and len(raw) > MAX_FRAME_BYTES:
        raise ProtocolError("frame_too_large", f"frame of {len(raw)} bytes is over {MAX_FRAME_BYTES} bytes")
    if isinstance(raw, str) and len(raw.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES:
        raise ProtocolError("frame_too_large", f"frame is over {MAX_FRAME_BYTES} bytes")
    return load_object(raw)


# ---- server -> client ------------------------------------------------------------------------


def encode_event(event: ServerEvent) -> str:
    """One control event as the JSON text of its frame."""
    return json.dumps(event.to_wire())


def parse_event(frame: dict[str, Any]) -> ServerEvent | None:
    """One control frame's object as a typed event; None for a type this side does not know (a
    newer server). A frame without a string ``type`` is a ProtocolError."""
    kind = frame.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("invalid_event", f"control frame without a type: {str(frame)[:200]}")
    cls = EVENTS.get(kind)
    if cls is not None:
        return cls.from_wire(frame)
    return aws.event_from_sample(frame)


def decode_event(raw: str | bytes) -> ServerEvent | None:
    """One control frame's text as a typed event (see :func:`parse_event`)."""
    try:
        payload = json.loads(raw)
    except ValueError:
        raise ProtocolError("invalid_event", f"control frame is not JSON: {raw[:200]!r}") from None
    if not isinstance(payload, dict):
        raise ProtocolError("invalid_event", f"control frame is not a JSON object: {raw[:200]!r}")
    return parse_event(payload)
