"""The AWS sample's shapes (aws-samples/sample-kokoro-tts-for-ai-agents), translated at the edge.

WebSocket: the sample sends ``{"text", "voice"?, "speed"?, "request_id"?, "request_timestamp"?,
"sample_rate"?}`` (no ``type``) and expects ``synthesis_start`` / ``synthesis_complete`` keyed by
``request_id`` (``synthesis_complete`` with ``total_duration_s`` and ``elapsed_s``), and errors
whose ``message`` holds a token it classifies by (``queue_full``, ``request_stale``). Inside, such
a message is a plain :class:`Speak` and its answers plain events: ``edge.ServerEdge`` remembers,
per connection, which utterances came in the sample's shape and writes their answers back in it,
so nothing past the edge knows about the sample.

``POST /invocations``: a body with ``request_timestamp``, ``request_id`` or ``stream`` (no native
body has them) is the sample's: :func:`request_from_sample` reads it (``format`` defaulting to
``wav``, as the sample's server does); the server answers in the sample's way (its SSE events,
``stream: false`` as one file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from .audio import check_sample_rate
from .events import ErrorEvent, ServerEvent, UtteranceEnd, UtteranceStart
from .fields import (
    ProtocolError,
    check_bool,
    check_timestamp,
    invalid,
    optional_id,
    optional_speed,
    reject_unknown,
    required_text,
)
from .languages import optional_lang
from .messages import Speak, SynthesisRequest, request_from_payload

# ``lang`` is ours (the sample has no language field): accepted in its shapes too, so a client of the
# sample can ask for a language without changing shape.
SAMPLE_FIELDS: Final = frozenset({"text", "voice", "speed", "request_id", "request_timestamp", "sample_rate", "lang"})
HTTP_SAMPLE_FIELDS: Final = frozenset({
    "text", "voice", "speed", "format", "sample_rate", "transport", "stream", "request_id", "request_timestamp",
    "lang",
})
HTTP_MARKERS: Final = ("request_timestamp", "request_id", "stream")
DEFAULT_MAX_REQUEST_AGE_S: Final = 56.0  # the sample's bound: SageMaker gives up on an invocation at 60 s
TOKENS: Final = ("queue_full", "request_stale")  # the error codes the sample's client looks for in `message`


def is_sample_request(payload: dict[str, Any]) -> bool:
    return payload.get("type") is None and "text" in payload


@dataclass(frozen=True, kw_only=True)
class SampleSpeak(Speak):
    """A :class:`Speak` that came in the AWS sample's shape, with that shape's own fields: when it
    was sent (epoch s) and this utterance's output rate. Answered in the sample's shape too."""

    request_timestamp: float | None = None
    sample_rate: int | None = None


def speak_from_sample(payload: dict[str, Any]) -> SampleSpeak:
    reject_unknown(payload, SAMPLE_FIELDS, "a synthesis request")
    stamp = payload.get("request_timestamp")
    rate = payload.get("sample_rate")
    return SampleSpeak(
        text=required_text(payload), id=optional_id(payload, "request_id"),
        voice=optional_id(payload, "voice"), speed=optional_speed(payload), lang=optional_lang(payload),
        request_timestamp=check_timestamp(stamp) if stamp is not None else None,
        sample_rate=check_sample_rate(rate) if rate is not None else None,
    )


def sample_from_speak(message: SampleSpeak) -> dict[str, Any]:
    out: dict[str, Any] = {"text": message.text, "request_id": message.id, "voice": message.voice,
                           "speed": message.speed, "request_timestamp": message.request_timestamp,
                           "sample_rate": message.sample_rate, "lang": message.lang}
    return {k: v for k, v in out.items() if v is not None}


def check_fresh(stamp: float, *, now: float, max_age_s: float, name: str = "request_timestamp") -> None:
    """ProtocolError ``request_stale`` (the token in its message too) for a request sent too long ago."""
    age = now - stamp
    if age > max_age_s:
        raise ProtocolError(
            "request_stale",
            f"{name}: request_stale: sent {age:.1f} s ago, over the limit of {max_age_s:g} s "
            "(KOKORO_MAX_REQUEST_AGE_S)",
            field=name,
        )


def sample_frame(event: UtteranceStart | UtteranceEnd, *, elapsed_s: float | None = None) -> dict[str, Any]:
    """An utterance event as the sample's ``synthesis_start`` / ``synthesis_complete``."""
    if isinstance(event, UtteranceStart):
        return {"type": "synthesis_start", "request_id": event.id}
    frame = {k: v for k, v in event.to_wire().items() if k not in ("type", "id", "turn")}
    frame["total_duration_s"] = round(event.audio_ms / 1000, 3)
    if elapsed_s is not None:
        frame["elapsed_s"] = round(elapsed_s, 3)
    return {"type": "synthesis_complete", "request_id": event.id, **frame}


def sample_error(event: ErrorEvent) -> dict[str, Any]:
    """An error about a sample-shape request: ``request_id``, and the code in the message, where the
    sample's client looks for it."""
    message = event.message if event.code in event.message else f"{event.code}: {event.message}"
    frame: dict[str, Any] = {"type": "error", "request_id": event.id, "code": event.code, "message": message}
    if event.field is not None:
        frame["field"] = event.field
    return frame


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


# ---- POST /invocations ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SampleRequest:
    """A ``POST /invocations`` body in the sample's shape."""

    request: SynthesisRequest
    stream: bool = True
    request_id: str | None = None
    request_timestamp: float | None = None


def is_sample_body(payload: dict[str, Any]) -> bool:
    return any(marker in payload for marker in HTTP_MARKERS)


# Visible ASCII: what an id in an HTTP header can be (no spaces, as for the caller's own X-Request-Id).
_HEADER_VALUE = re.compile(r"[!-~]+")


def header_id(payload: dict[str, Any], name: str) -> str | None:
    """An identifier the response echoes in a header (``X-Request-Id``): visible ASCII only."""
    value = optional_id(payload, name)
    if value is not None and not _HEADER_VALUE.fullmatch(value):
        raise invalid(name, "must be visible ASCII, no spaces (it is echoed in the X-Request-Id header)")
    return value


def request_from_sample(payload: dict[str, Any]) -> SampleRequest:
    request = request_from_payload(payload, fields=HTTP_SAMPLE_FIELDS, default_format="wav")
    stamp = payload.get("request_timestamp")
    return SampleRequest(
        request=request, stream=check_bool(payload.get("stream", True), name="stream"),
        request_id=header_id(payload, "request_id"),
        request_timestamp=check_timestamp(stamp) if stamp is not None else None,
    )
