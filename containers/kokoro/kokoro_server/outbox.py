"""A session's outgoing side: one bounded queue of frames and the one task that writes them.

Every frame is tagged with the generation it belongs to (None: a control frame that always goes)
and the utterance it belongs to; a cancel starts a new generation (or marks the utterances it
names dropped), so no audio of a cancelled turn or utterance leaves after ``cancelled``. The
queue holds at most OUTBOX_FRAMES frames; a send that makes no progress for ``send_timeout_s``
ends the session (STALLED: the client stopped reading and its socket buffers are full).

What a session holds for a client that stops reading is bounded by HELD_BYTES_MAX: the queue, the
frame being written, and the transport's write buffer (uvicorn writes only while it is under
asyncio's 64 KiB high-water mark, so it ends at most one frame over it). /ping reports the
largest ``held_bytes`` of the live sessions; tests/kokoro/test_hardening_faults.py checks it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, Union

from starlette.websockets import WebSocket

from voicestream.protocol import AUDIO_FRAME_BYTES, ServerEdge, ServerEvent

log = logging.getLogger(__name__)

OUTBOX_FRAMES = 32  # frames a slow reader may leave unsent before the speaker waits for it
STALLED = "stalled"  # the client read nothing for send_timeout_s while audio waited: 4002

# The transport's write buffer, as the app's WebSocket protocol exposes it in the scope.
WRITE_BUFFER_EXTENSION = "kokoro.write_buffer"
TRANSPORT_HIGH_WATER = 64 * 1024  # asyncio's default high-water mark for a transport's write buffer
WS_HEADER_BYTES = 10  # the most a server frame's header adds (no mask)
# Frames are at most AUDIO_FRAME_BYTES (audio is cut to it; control frames are far smaller).
HELD_BYTES_MAX = ((OUTBOX_FRAMES + 2) * (AUDIO_FRAME_BYTES + WS_HEADER_BYTES) + TRANSPORT_HIGH_WATER)

Frame = Union[ServerEvent, bytes]


class Droppable(Protocol):
    """What a frame may belong to besides its generation: an utterance, cancelled by id."""

    dropped: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class _Queued:
    gen: int | None  # None: a control frame, always sent
    of: Droppable | None
    wire: bytes | str
    taken: Callable[[], None] | None

    def dropped(self, generation: int) -> bool:
        return (self.gen is not None and self.gen != generation) or (self.of is not None and self.of.dropped)


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
        # events are encoded as they are queued (in order, so the edge sees them as the client will)
        self._queue: asyncio.Queue[_Queued] = asyncio.Queue(OUTBOX_FRAMES)
        self.generation = 0
        self._queued_bytes = 0  # of the frames in the queue
        self._in_hand = 0  # of the frame being written

    def new_generation(self) -> None:
        """Whatever is queued or still to be emitted under older generations is never sent."""
        self.generation += 1

    def pending(self) -> bool:
        return not self._queue.empty()

    def held_bytes(self) -> int:
        """Outgoing bytes this session holds now: queued, being written, and in the transport."""
        write_buffer = self._ws.scope.get("extensions", {}).get(WRITE_BUFFER_EXTENSION)
        return self._queued_bytes + self._in_hand + (write_buffer() if write_buffer is not None else 0)

    async def _put(
        self, gen: int | None, frame: Frame, of: Droppable | None = None, taken: Callable[[], None] | None = None,
    ) -> None:
        wire = frame if isinstance(frame, bytes) else self._edge.encode(frame)
        await self._queue.put(_Queued(gen=gen, of=of, wire=wire, taken=taken))
        self._queued_bytes += len(wire)

    async def emit(
        self, gen: int, frame: Frame, *, of: Droppable | None = None, taken: Callable[[], None] | None = None,
    ) -> None:
        """Queue a frame of generation ``gen`` (and of utterance ``of``: dropped with it). ``taken``
        runs when the writer takes the frame to send it, not dropped: from then on it is as good as
        sent, and a cancel can no longer take it back."""
        await self._put(gen, frame, of, taken)

    async def control(self, event: ServerEvent) -> None:
        await self._put(None, event)

    async def send_audio(self, gen: int, data: bytes, *, of: Droppable | None = None) -> int:
        """Queue ``data`` as binary frames of at most AUDIO_FRAME_BYTES; return its length."""
        for start in range(0, len(data), AUDIO_FRAME_BYTES):
            await self.emit(gen, data[start:start + AUDIO_FRAME_BYTES], of=of)
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
            queued = await self._queue.get()
            frame = queued.wire
            self._in_hand = len(frame)
            self._queued_bytes -= self._in_hand
            try:
                if queued.dropped(self.generation):
                    continue  # a frame of a cancelled turn or utterance: never sent
                if queued.taken is not None:
                    queued.taken()
                if isinstance(frame, bytes):
                    sending = self._ws.send_bytes(frame)
                else:
                    sending = self._ws.send_text(frame)
                try:
                    await asyncio.wait_for(sending, timeout)
                except asyncio.TimeoutError:
                    log.warning("client read nothing for %.1f s: dropping the session", timeout)
                    return STALLED
                self._on_sent()
            finally:
                self._in_hand = 0
                self._queue.task_done()
