"""The app's two ASGI middlewares: request ids on every response, and refusals while draining."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.responses import JSONResponse


class RequestIds:
    """ASGI middleware: every HTTP response carries ``x-request-id``, as OpenAI's do (LiveKit's
    OpenAI plugin reads it): the one the route set (the AWS sample's shape answers with its
    ``request_id``), else the caller's own when it sent a usable one, else a new ``req_<hex>``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(b"x-request-id", b"")
        request_id = given if _usable_id(given) else f"req_{uuid.uuid4().hex}".encode()

        async def with_id(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(name.lower() == b"x-request-id" for name, _ in headers):  # a route's own stays
                    message["headers"] = [*headers, (b"x-request-id", request_id)]
            await send(message)

        await self.app(scope, receive, with_id)


def _usable_id(value: bytes) -> bool:
    return 0 < len(value) <= 128 and all(0x21 <= byte <= 0x7E for byte in value)


class RefuseWhileDraining:
    """ASGI middleware: while draining, a new HTTP request other than /ping gets 503 ``draining``
    (a retry reaches another instance); WebSockets are refused by ``bidirectional``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        state = getattr(scope.get("app"), "state", None) if scope["type"] == "http" else None
        if (scope["type"] == "http" and scope.get("path") != "/ping" and state is not None
                and getattr(state, "draining", False)):
            response = JSONResponse({"error": {"code": "draining", "message": "the server is stopping: retry"}},
                                    status_code=503, headers={"Retry-After": "1"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
