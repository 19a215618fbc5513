"""The bidirectional protocol, implemented once over an abstract frame transport.

A transport only moves frames (local WebSocket, SageMaker's HTTP/2 bidi stream); everything the
protocol means (ids, events, errors, turns, pipelining) lives in :class:`TtsSession`, so every
transport behaves the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable
from typing import Protocol, runtime_checkable

from voicestream.protocol import (
    Cancel, Close, Configure, Delta, Flush, Format, Ping, Speak, SynthesisRequest,
    encode_client_message,
)

from .errors import (
    TtsConfigError, TtsConnectionError, TtsError, TtsProtocolError, TtsServerError, TtsTimeoutError,
)
from .events import (
    AudioChunk, Cancelled, Configured, ErrorEvent, Pong, TtsEvent, TurnEnd, UtteranceEnd,
    UtteranceStart, decode_frame,
)

__all__ = [
    "AudioChunk", "Cancelled", "Configured", "ErrorEvent", "FrameTransport", "Pong", "StreamingTts",
    "TtsConfigError", "TtsConnectionError", "TtsError", "TtsEvent", "TtsProtocolError",
    "TtsServerError", "TtsSession", "TtsTimeoutError", "TurnEnd", "UtteranceEnd", "UtteranceStart",
]

log = logging.getLogger(__name__)


@runtime_checkable
class FrameTransport(Protocol):
    """Moves whole frames. ``receive`` raises :class:`TtsConnectionError` when the peer is gone."""

    async def send_text(self, data: str) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def receive(self) -> str | bytes: ...

    async def close(self) -> None: ...


class StreamingTts(Protocol):
    """One-shot synthesis (``POST /invocations`` or its SageMaker form): encoded audio bytes out."""

    def stream(self, request: SynthesisRequest) -> AsyncIterator[bytes]: ...


class TtsSession:
    """One bidirectional session: send methods, plus :meth:`events` for what comes back.

    Read :meth:`events` from one task at a time. Sends may come from any task.
    """

    def __init__(
        self,
        *,
        transport: FrameTransport,
        receive_timeout: float | None = None,
        raise_errors: bool = True,
    ) -> None:
        self._transport = transport
        self._receive_timeout = receive_timeout
        self._raise_errors = raise_errors
        self._pending: deque[TtsEvent] = deque()
        self._current: str | None = None  # the utterance binary frames belong to
        self._skip_to_cancelled = 0  # frames to drop after an abandoned speak_stream's cancel
        self._receiving = False  # one reader at a time: two would split the stream between them
        self._closed = False
        self._send_lock = asyncio.Lock()

    async def __aenter__(self) -> TtsSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- sending ---------------------------------------------------------------------------

    async def _send(self, message: Configure | Speak | Delta | Flush | Cancel | Close | Ping) -> None:
        if self._closed:
            raise TtsConnectionError("the session is closed")
        async with self._send_lock:  # a frame is never interleaved with another
            await self._transport.send_text(encode_client_message(message))

    async def configure(
        self,
        *,
        voice: str | None = None,
        speed: float | None = None,
        format: Format | None = None,
        sample_rate: int | None = None,
        timestamps: bool | None = None,
        wait: bool = True,
    ) -> Configured | None:
        """Set the session's defaults. With ``wait`` read until ``configured`` (raising the server's
        refusal, e.g. an unknown voice, as :class:`TtsServerError`); events read meanwhile are kept
        for :meth:`events`. Pass ``wait=False`` while another task is reading :meth:`events` (the
        ``Configured`` event then arrives there)."""
        await self._send(Configure(voice=voice, speed=speed, format=format, sample_rate=sample_rate,
                                   timestamps=timestamps))
        if not wait:
            return None
        held: list[TtsEvent] = []
        try:
            while True:
                event = await self._next_event()
                if isinstance(event, Configured):
                    return event
                if isinstance(event, ErrorEvent) and event.id is None:
                    raise TtsServerError(event.code, event.message, field=event.field)
                held.append(event)
        finally:
            self._pending.extendleft(reversed(held))

    async def speak(
        self, text: str, *, id: str | None = None, voice: str | None = None, speed: float | None = None
    ) -> str:
        """Queue ``text`` as one utterance; return its id (generated when not given)."""
        uid = id if id is not None else uuid.uuid4().hex[:16]
        await self._send(Speak(text=text, id=uid, voice=voice, speed=speed))
        return uid

    async def delta(self, text: str) -> None:
        """Send raw LLM tokens; the server cuts sentences itself."""
        await self._send(Delta(text=text))

    async def flush(self) -> None:
        """End the turn: the server answers ``turn_end`` after the turn's last audio."""
        await self._send(Flush())

    async def cancel(self) -> None:
        """Barge-in: drop queued work and audio; the server answers ``cancelled``."""
        await self._send(Cancel())

    async def ping(self) -> None:
        await self._send(Ping())

    async def close(self) -> None:
        """Say ``close`` (best effort) and close the transport. Safe to call twice."""
        if self._closed:
            return
        with contextlib.suppress(TtsError, OSError):
            await asyncio.wait_for(self._send(Close()), timeout=2.0)
        self._closed = True
        with contextlib.suppress(Exception):
            await self._transport.close()

    # ---- receiving -------------------------------------------------------------------------

    async def _receive_frame(self) -> str | bytes:
        if self._closed:
            raise TtsConnectionError("the session is closed")
        if self._receive_timeout is None:
            return await self._transport.receive()
        try:
            return await asyncio.wait_for(self._transport.receive(), self._receive_timeout)
        except TimeoutError:
            raise TtsTimeoutError(f"nothing received for {self._receive_timeout:g} s") from None

    async def _next_event(self) -> TtsEvent:
        """The next event, raising server errors unless ``raise_errors`` is False."""
        if self._receiving:
            raise RuntimeError("another task is already reading this session's events")
        self._receiving = True
        try:
            return await self._read_event()
        finally:
            self._receiving = False

    async def _read_event(self) -> TtsEvent:
        while True:
            if self._pending:
                return self._pending.popleft()
            frame = await self._receive_frame()
            if isinstance(frame, (bytes, bytearray, memoryview)):
                if self._skip_to_cancelled:
                    continue
                return AudioChunk(utterance_id=self._current, data=bytes(frame))
            event = decode_frame(frame)
            if event is None:
                log.debug("ignoring an unknown server frame: %s", frame[:80])
                continue
            if self._skip_to_cancelled:
                if isinstance(event, Cancelled):
                    self._skip_to_cancelled -= 1
                continue
            if isinstance(event, UtteranceStart):
                self._current = event.id
            if isinstance(event, ErrorEvent) and self._raise_errors:
                raise TtsServerError(event.code, event.message, field=event.field, id=event.id)
            return event

    async def events(self) -> AsyncGenerator[TtsEvent, None]:
        """Everything the server sends, in order, until the connection ends (then
        :class:`TtsConnectionError`). Binary frames become :class:`AudioChunk`."""
        while True:
            yield await self._next_event()

    async def speak_stream(
        self,
        sentences: AsyncIterable[str] | Iterable[str],
        *,
        voice: str | None = None,
        speed: float | None = None,
    ) -> AsyncGenerator[TtsEvent, None]:
        """Speak ``sentences`` as one turn, pipelined: each is sent the moment it arrives while the
        caller reads audio. Yields every event up to and including the turn's :class:`TurnEnd`.

        Leaving early cancels the turn; its leftover frames are dropped from later reads.
        """
        sender = asyncio.create_task(self._send_turn(sentences, voice=voice, speed=speed))
        receiving: asyncio.Task[TtsEvent] | None = None
        finished = False
        try:
            while True:
                receiving = asyncio.create_task(self._next_event())
                await asyncio.wait({receiving, sender}, return_when=asyncio.FIRST_COMPLETED)
                if not receiving.done() and sender.done() and sender.exception() is not None:
                    receiving.cancel()
                    with contextlib.suppress(asyncio.CancelledError, TtsError):
                        await receiving
                    sender.result()  # raises the sender's error: the sentence source or the send
                event = await receiving
                yield event
                if isinstance(event, TurnEnd):
                    finished = True
                    return
        finally:
            for task in (receiving, sender):
                if task is None:
                    continue
                if not task.done():
                    task.cancel()
                with contextlib.suppress(BaseException):  # also retrieves an error already raised
                    await task
            if not finished and not self._closed:
                await self._abandon_turn()

    async def _send_turn(
        self, sentences: AsyncIterable[str] | Iterable[str], *, voice: str | None, speed: float | None
    ) -> None:
        if isinstance(sentences, AsyncIterable):
            async for sentence in sentences:
                if sentence.strip():
                    await self.speak(sentence, voice=voice, speed=speed)
        else:
            for sentence in sentences:
                if sentence.strip():
                    await self.speak(sentence, voice=voice, speed=speed)
        await self.flush()

    async def _abandon_turn(self) -> None:
        """Cancel a turn nobody is reading; drop its frames up to the ``cancelled`` answer."""
        try:
            await asyncio.wait_for(self.cancel(), timeout=2.0)
        except (TtsError, OSError, TimeoutError):
            return
        self._skip_to_cancelled += 1
        self._pending.clear()
