"""SIGTERM drains before uvicorn stops: SageMaker stops a container with SIGTERM on every update and
scale-in, then SIGKILL 30 s later (its inference container guide). Plain uvicorn closes every
WebSocket at once (1012), cutting the sentence a caller is hearing.

The first SIGTERM runs ``app.drain`` (new sessions and requests refused, /ping 503 ``draining``,
each session's utterance in flight finished, then 1001), and only then uvicorn's own shutdown,
which lets HTTP requests in flight finish within ``timeout_graceful_shutdown``. A second SIGTERM,
or SIGINT, stops at once, as uvicorn does.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn

log = logging.getLogger(__name__)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with ``drain`` awaited between the first SIGTERM and its shutdown."""

    def __init__(self, config: uvicorn.Config, *, drain: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._drain = drain
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Future[None] | None = None
        self._signalled = False

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A signal handler (main thread, between bytecodes): only hands the drain to the loop."""
        if sig != signal.SIGTERM or self._signalled or self._loop is None or self.should_exit:
            super().handle_exit(sig, frame)
            return
        self._signalled = True
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        self._draining = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        try:
            await self._drain()
        except Exception:  # a drain that fails must still let the server stop
            log.exception("draining failed; stopping now")
        finally:
            self.should_exit = True
