"""A session's outgoing side: one bounded queue of frames and the one task that writes them.

Every frame is tagged with the generation it belongs to (None: a control frame that always goes);
a cancel starts a new generation, so no audio of a cancelled turn leaves after ``cancelled``. The
queue holds at most OUTBOX_FRAMES frames; a send that makes no progress for ``send_timeout_s``
ends the session (STALLED: the client stopped reading and its socket buffers are full).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Union

from starlette.websockets import WebSocket
from voicestream.protocol import AUDIO_FRAME_BYTES, ServerEdge, ServerEvent

log = logging.getLogger(__name__)

OUTBOX_FRAMES = 32  # frames a slow reader may leave unsent before the speaker waits for it
STALLED = "stalled"  # the client read nothing for send_timeout_s while audio waited: 4002

Frame = Union[ServerEvent, bytes]


class Outbox:
    """Queue frames in order (``emit``, ``control``, ``send_audio``); :meth:`run` writes them."""

    def __init__(
        self, *, websocket: WebSocket, edge: ServerEdge, send_timeout_s: float,
        on_sent: Callable[[], None],
    ) -> None:
        self._ws = websocket
        self._edge = edge
        self._send_timeout_s = send_timeout_s
        self._on_sent = on_sent
        self._queue: asyncio.Queue[tuple[int | None, Frame]] = asyncio.Queue(OUTBOX_FRAMES)
        self.generation = 0

    def new_generation(self) -> None:
        """Whatever is queued or still to be emitted under older generations is never sent."""
        self.generation += 1

    def pending(self) -> bool:
        return not self._queue.empty()

    async def emit(self, gen: int, frame: Frame) -> None:
        await self._queue.put((gen, frame))

    async def control(self, event: ServerEvent) -> None:
        await self._queue.put((None, event))

    async def send_audio(self, gen: int, data: bytes) -> int:
        """Queue ``data`` as binary frames of at most AUDIO_FRAME_BYTES; return its length."""
        for start in range(0, len(data), AUDIO_FRAME_BYTES):
            await self.emit(gen, data[start:start + AUDIO_FRAME_BYTES])
        return len(data)

    async def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for what is queued to be written."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout=timeout_s)
        except asyncio.TimeoutError:
            pass

    async def run(self) -> str:
        """Send the queue in order; return STALLED when one send makes no progress for the timeout."""
        timeout = self._send_timeout_s
        while True:
            gen, frame = await self._queue.get()
            try:
                if gen is not None and gen != self.generation:
                    continue  # audio of a cancelled turn: never sent
                if isinstance(frame, bytes):
                    sending = self._ws.send_bytes(frame)
                else:
                    sending = self._ws.send_text(self._edge.encode(frame))
                try:
                    await asyncio.wait_for(sending, timeout)
                except asyncio.TimeoutError:
                    log.warning("client read nothing for %.1f s: dropping the session", timeout)
                    return STALLED
                self._on_sent()
            finally:
                self._queue.task_done()
