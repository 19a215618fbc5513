"""SageMaker's wire shapes, through the SDK's own models and codecs (no hand-made framing).

Request events are decoded with ``smithy-aws-event-stream`` and deserialized into the SDK's
``RequestStreamEvent``; response events are the SDK's ``ResponseStreamEvent*`` shapes, serialized
by the same library in server mode. The boto3 response stream (``InvokeEndpointWithResponseStream``)
uses the same ``PayloadPart`` / ``ModelStreamError`` / ``InternalStreamFailure`` shapes in the
sagemaker-runtime model, so it shares the encoder. Errors are restJson1 bodies with
``x-amzn-ErrorType``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aws_sdk_sagemaker_runtime_http2.models import (
    InternalStreamFailure,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponsePayloadPart,
    ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
    _RequestStreamEventDeserializer,
)
from smithy_aws_event_stream._private.deserializers import EventDeserializer
from smithy_aws_event_stream._private.serializers import EventSerializer
from smithy_aws_event_stream.events import Event
from smithy_json import JSONCodec

EVENT_STREAM = "application/vnd.amazon.eventstream"
MAX_PART_BYTES = 16 * 1024 * 1024  # the event stream's own payload limit

Receive = Callable[[], Awaitable[dict[str, Any]]]


class WireError(Exception):
    """A request body that is not a valid event stream of the operation's events."""


class BodyReader:
    """An ASGI request body as the exact-size async ``read`` the event-stream decoder wants."""

    def __init__(self, *, receive: Receive) -> None:
        self._receive = receive
        self._buffer = bytearray()
        self._ended = False
        self.disconnected = False

    async def read(self, size: int = -1) -> bytes:
        while not self._ended and (size < 0 or len(self._buffer) < size):
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._ended = self.disconnected = True
            else:
                self._buffer += message.get("body", b"")
                self._ended = not message.get("more_body", False)
        size = len(self._buffer) if size < 0 else min(size, len(self._buffer))
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def drain(self, *, timeout: float) -> None:
        """Read and drop the rest of the body (at most ``timeout`` seconds), keeping nothing."""
        async def discard() -> None:
            while not self._ended:
                self._buffer.clear()
                await self.read(64 * 1024)
            self._buffer.clear()

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(discard(), timeout=timeout)


def decode_request_part(inner: bytes) -> RequestPayloadPart:
    """One signed envelope's payload as the SDK's RequestPayloadPart (the only request event)."""
    try:
        event = Event.decode(io.BytesIO(inner))
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the client's malformed event
        raise WireError(f"malformed event: {exc}") from exc
    if event is None:
        raise WireError("empty event")
    if event.message.headers.get(":message-type") != "event":
        raise WireError(f"unexpected :message-type {event.message.headers.get(':message-type')!r}")
    try:
        shape = _RequestStreamEventDeserializer().deserialize(
            EventDeserializer(event=event, payload_codec=JSONCodec(), is_client_mode=False))
    except Exception as exc:  # noqa: BLE001
        raise WireError(f"event does not match RequestStreamEvent: {exc}") from exc
    if not isinstance(shape, RequestStreamEventPayloadPart):
        raise WireError(f"unknown request event {event.message.headers.get(':event-type')!r}")
    return shape.value


def _encode(shape: Any) -> bytes:
    serializer = EventSerializer(payload_codec=JSONCodec(), is_client_mode=False)  # type: ignore[abstract]
    shape.serialize(serializer)
    result = serializer.get_result()
    assert result is not None
    return result.encode()


def payload_part(data: bytes, *, data_type: str | None = None, completion_state: str | None = None) -> bytes:
    return _encode(ResponseStreamEventPayloadPart(
        value=ResponsePayloadPart(bytes_=data, data_type=data_type, completion_state=completion_state)))


def model_stream_error(message: str, *, error_code: str) -> bytes:
    return _encode(ResponseStreamEventModelStreamError(value=ModelStreamError(message=message, error_code=error_code)))


def internal_stream_failure(message: str) -> bytes:
    return _encode(ResponseStreamEventInternalStreamFailure(value=InternalStreamFailure(message=message)))


def error_body(code: str, message: str, **extra: Any) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A restJson1 error: the type in ``x-amzn-ErrorType``, the model's members in the body."""
    body = json.dumps({"Message": message, **extra}).encode()
    headers = [(b"content-type", b"application/json"), (b"x-amzn-errortype", code.encode()),
               (b"content-length", str(len(body)).encode())]
    return headers, body
