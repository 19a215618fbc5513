"""A session's incoming side: one receive at a time, each frame parsed at the edge and handed on.

Any refusal becomes an ``error`` event and the session goes on. The reader also watches for an
idle session: no message and nothing to speak or send for ``idle_timeout_s`` ends it (IDLE).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from voicestream.protocol import ClientMessage, Close, ErrorEvent, ProtocolError, ServerEdge, ServerEvent

log = logging.getLogger(__name__)

# How a session ended; the app turns each into a close code (docs/protocol.md#close-codes).
CLOSE = "close"  # the client sent `close`: 1000
DISCONNECT = "disconnect"  # the client went away
IDLE = "idle"  # no message and nothing to speak for idle_timeout_s: 4001


class Reader:
    """Receive until the client closes, disconnects or idles; return which (CLOSE, DISCONNECT, IDLE)."""

    def __init__(
        self, *, websocket: WebSocket, edge: ServerEdge, idle_timeout_s: float,
        busy: Callable[[], bool], handle: Callable[[ClientMessage], Awaitable[None]],
        report: Callable[[ServerEvent], Awaitable[None]],
    ) -> None:
        self._ws = websocket
        self._edge = edge
        self._idle_s = idle_timeout_s
        self._busy = busy
        self._handle = handle
        self._report = report
        self._last_active = time.monotonic()  # the last client message, or the last frame sent

    def touch(self) -> None:
        """Something happened on the connection: the idle clock starts again."""
        self._last_active = time.monotonic()

    async def run(self) -> str:
        receiving: asyncio.Future[Any] | None = None
        try:
            while True:
                if receiving is None:  # one receive at a time, never cancelled mid-message
                    receiving = asyncio.ensure_future(self._ws.receive())
                wait_s = max(0.05, self._last_active + self._idle_s - time.monotonic())
                done, _ = await asyncio.wait({receiving}, timeout=wait_s)
                if not done:
                    if self._busy():
                        self.touch()
                    elif time.monotonic() - self._last_active >= self._idle_s:
                        return IDLE
                    continue
                try:
                    message = receiving.result()
                except (WebSocketDisconnect, RuntimeError, OSError):
                    return DISCONNECT
                finally:
                    receiving = None
                if message["type"] == "websocket.disconnect":
                    return DISCONNECT
                self.touch()
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                if await self._message(raw) == CLOSE:
                    return CLOSE
        finally:
            if receiving is not None:
                receiving.cancel()

    async def _message(self, raw: str | bytes) -> str | None:
        """Handle one client frame; any refusal is an error event and the session goes on."""
        parsed: Any = None
        try:
            parsed = self._edge.parse(raw)
            if isinstance(parsed, Close):
                return CLOSE
            await self._handle(parsed)
        except ProtocolError as exc:
            await self._report(ErrorEvent(
                code=exc.code, message=exc.message, field=exc.field, id=exc.id or getattr(parsed, "id", None),
            ))
        except Exception as exc:  # a bug, not the client's fault: say so, keep the session
            log.exception("message handling failed")
            await self._report(ErrorEvent(code="internal_error", message=f"internal error: {type(exc).__name__}"))
        return None
