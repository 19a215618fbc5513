"""The stand-in's routes: SageMaker runtime's three invoke operations, SigV4 checked first."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from .bidi import BidiRelay
from .invoke import MAX_PAYLOAD_BYTES, InvokeRelay
from .settings import StandInSettings
from .sigv4 import AuthError, Credentials, IncomingRequest, RequestVerifier
from .wire import error_body

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

ACCOUNT = "000000000000"
VARIANT = "AllTraffic"
_ROUTE = re.compile(r"^/endpoints/([^/]+)/(invocations|invocations-response-stream|invocations-bidirectional-stream)$")


async def _reply_error(send: Send, status: int, code: str, message: str) -> None:
    headers, body = error_body(code, message)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, *, limit: int) -> bytes | None:
    """The whole request body, or None when it is over ``limit`` (the rest is drained)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return bytes(body)
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body) if len(body) <= limit else None


class SageMakerRuntimeApp:
    """An ASGI app serving one endpoint name, in front of one container."""

    def __init__(self, *, settings: StandInSettings) -> None:
        self._settings = settings
        self._credentials = Credentials(access_key_id=settings.access_key_id,
                                        secret_access_key=settings.secret_access_key)
        self._verifier = RequestVerifier(credentials=self._credentials, region=settings.region)
        self._invoke = InvokeRelay(container_url=settings.container_url, variant=VARIANT)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        match = _ROUTE.match(scope["path"])
        if scope["method"] != "POST" or match is None:
            await _reply_error(send, 404, "UnknownOperationException",
                               f"no operation at {scope['method']} {scope['path']}")
            return
        name, operation = match.groups()
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        streaming = operation == "invocations-bidirectional-stream"
        body = None if streaming else await _read_body(receive, limit=MAX_PAYLOAD_BYTES + 1024)
        if body is None and not streaming:
            await _reply_error(send, 413, "ValidationError", f"Request body is over {MAX_PAYLOAD_BYTES} bytes")
            return
        request = IncomingRequest(method=scope["method"], path=scope["raw_path"].decode("latin-1").split("?")[0],
                                  query=scope["query_string"].decode("latin-1"), headers=headers, body=body)
        try:
            verified = await self._verifier.verify(request)
        except AuthError as exc:
            log.info("refused %s: %s", scope["path"], exc.code)
            await _reply_error(send, 403, exc.code, exc.message)
            return
        if name != self._settings.endpoint_name:
            await _reply_error(send, 400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
            return
        if operation == "invocations":
            await self._invoke.invoke(send, headers, body or b"")
        elif operation == "invocations-response-stream":
            await self._invoke.invoke_stream(send, headers, body or b"")
        else:
            relay = BidiRelay(credentials=self._credentials, verified=verified,
                              container_ws_url=self._ws_url(request), variant=VARIANT)
            await relay(receive, send)

    def _ws_url(self, request: IncomingRequest) -> str:
        """The container's WebSocket: its documented path, or X-Amzn-SageMaker-Model-Invocation-Path."""
        url = self._settings.container_ws_url
        path = request.header("x-amzn-sagemaker-model-invocation-path")
        if path:
            url = url.rsplit("/invocations-bidirectional-stream", 1)[0] + "/" + path.lstrip("/")
        query = request.header("x-amzn-sagemaker-model-query-string")
        return f"{url}?{query}" if query else url

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._invoke.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return
