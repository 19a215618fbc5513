"""InvokeEndpointWithBidirectionalStream: one HTTP/2 stream relayed to the container's WebSocket.

SageMaker's documented relay: each request ``PayloadPart`` becomes one WebSocket frame on the
container's ``/invocations-bidirectional-stream``, a text frame when ``DataType`` is ``UTF8`` and
binary otherwise; each frame back becomes a response ``PayloadPart`` marked the same way. The
response headers go out once the container accepted the WebSocket, so a client learns at connect
whether the endpoint is there. Every request event's signature is checked before it is relayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import websockets
from smithy_aws_event_stream.events import Event
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from .sigv4 import AuthError, Credentials, EventSignatureChain, VerifiedRequest
from .wire import (
    EVENT_STREAM,
    BodyReader,
    WireError,
    decode_request_part,
    error_body,
    internal_stream_failure,
    model_stream_error,
    payload_part,
)

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

CONNECT_TIMEOUT_S = 5.0
PING_INTERVAL_S = 60.0  # SageMaker pings the container every 60 s ...
PING_TIMEOUT_S = 300.0  # ... and gives up after five missed pongs
MAX_FRAME_BYTES = 16 * 1024 * 1024
# When the container ends first, the response stays open this long for the client to end its request
# too (how long SageMaker waits is not documented): a client that closes on the container's close
# then ends both sides cleanly. Late request DATA is dropped either way (h2_late_data.py).
CLIENT_END_WAIT_S = 2.0


async def _send_frame(ws: Any, frame: str | bytes) -> None:
    """One frame to the container; once it has gone, later frames are dropped (the other side reports it)."""
    with contextlib.suppress(ConnectionClosed):
        await ws.send(frame)


class BidiRelay:
    """One client stream <-> one container WebSocket; either side ending ends both."""

    def __init__(self, *, credentials: Credentials, verified: VerifiedRequest, container_ws_url: str,
                 variant: str) -> None:
        self._chain = EventSignatureChain(credentials=credentials, verified=verified)
        self._url = container_ws_url
        self._variant = variant

    async def __call__(self, receive: Receive, send: Send) -> None:
        try:
            ws = await websockets.connect(self._url, open_timeout=CONNECT_TIMEOUT_S, max_size=MAX_FRAME_BYTES,
                                          ping_interval=PING_INTERVAL_S, ping_timeout=PING_TIMEOUT_S,
                                          compression=None)
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as exc:
            headers, body = error_body("ModelError", f"the container did not accept the WebSocket at {self._url}: "
                                       f"{type(exc).__name__}: {exc}", ErrorCode="ModelError")
            await send({"type": "http.response.start", "status": 424, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", EVENT_STREAM.encode()), (b"x-amzn-invoked-production-variant", self._variant.encode())]})
        outcome: asyncio.Queue[bytes | None] = asyncio.Queue()
        up = asyncio.create_task(self._client_to_container(receive, ws, outcome))
        down = asyncio.create_task(self._container_to_client(ws, outcome))
        try:
            while (chunk := await outcome.get()) is not None:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not up.done():  # the container ended first: let the client end its side before ours
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(up), timeout=CLIENT_END_WAIT_S)
        finally:
            for task in (up, down):
                task.cancel()
            await asyncio.gather(up, down, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), timeout=2.0)
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _client_to_container(self, receive: Receive, ws: Any, out: asyncio.Queue[bytes | None]) -> None:
        """Verify, decode and relay each request event until the client's signed end of stream.

        Reading goes on after the container has gone (its frames are dropped) or after a bad event
        (the body is drained), so the request always ends before the response does (see
        CLIENT_END_WAIT_S)."""
        reader = BodyReader(receive=receive)
        text = bytearray()
        try:
            while (envelope := await Event.decode_async(reader)) is not None:
                inner = self._chain.verify(envelope.message)
                if not inner:  # the client's signed end of stream
                    await reader.drain(timeout=CLIENT_END_WAIT_S)
                    break
                part = decode_request_part(inner)
                data = part.bytes_ or b""
                if part.data_type == "UTF8":
                    text += data
                    if part.completion_state == "PARTIAL":
                        continue
                    await _send_frame(ws, text.decode("utf-8"))
                    text.clear()
                else:
                    await _send_frame(ws, data)
        except AuthError as exc:
            await out.put(internal_stream_failure(f"{exc.code}: {exc.message}"))
            await reader.drain(timeout=CLIENT_END_WAIT_S)
        except (WireError, UnicodeDecodeError) as exc:
            await out.put(internal_stream_failure(f"InputValidationError: {exc}"))
            await reader.drain(timeout=CLIENT_END_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - a broken request body ends this stream only
            log.info("request stream ended: %s: %s", type(exc).__name__, exc)
        if reader.disconnected:
            await out.put(None)
            return
        with contextlib.suppress(Exception):
            await ws.close(1000, "client closed its input stream")

    async def _container_to_client(self, ws: Any, out: asyncio.Queue[bytes | None]) -> None:
        try:
            async for frame in ws:
                if isinstance(frame, str):
                    await out.put(payload_part(frame.encode("utf-8"), data_type="UTF8", completion_state="COMPLETE"))
                else:
                    await out.put(payload_part(frame, data_type="BINARY", completion_state="COMPLETE"))
        except ConnectionClosed:
            pass
        code = ws.close_code
        if code is not None and code not in (1000, 1001):  # 1006: the container went away without a close
            reason = ws.close_reason or "no reason"
            await out.put(model_stream_error(f"the container closed the WebSocket with {code}: {reason}",
                                             error_code="ModelStreamError"))
        await out.put(None)
