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
from collections.abc import AsyncGenerator, AsyncIterable, Iterable

from voicestream.protocol import (
    Cancel,
    Close,
    CloseCode,
    Configure,
    Delta,
    Flush,
    Format,
    Ping,
    Speak,
    encode_client_message,
)

from .errors import (
    TtsConfigError,
    TtsConnectionError,
    TtsError,
    TtsProtocolError,
    TtsServerError,
    TtsTimeoutError,
)
from .events import (
    AudioChunk,
    Cancelled,
    Configured,
    ErrorEvent,
    Pong,
    TtsEvent,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
    decode_frame,
)
from .resume import ResumeLog
from .transport import FrameTransport, Reconnect, StreamingTts

__all__ = [
    "AudioChunk", "Cancelled", "Configured", "ErrorEvent", "FrameTransport", "Pong", "StreamingTts",
    "TtsConfigError", "TtsConnectionError", "TtsError", "TtsEvent", "TtsProtocolError",
    "TtsServerError", "TtsSession", "TtsTimeoutError", "TurnEnd", "UtteranceEnd", "UtteranceStart",
]

log = logging.getLogger(__name__)

RESUME_ATTEMPTS = 5  # connections tried without an answer in between before the session gives up
RESUME_BACKOFF_S = (0.05, 0.25, 0.5, 1.0, 2.0)  # before each of them
GOING_AWAY = "going_away"  # the error a stopping server sends before it closes (docs/protocol.md)
SERVICE_RESTART = 1012  # RFC 6455: what a plain uvicorn sends its WebSockets when it stops
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
        reconnect: Reconnect | None = None,
    ) -> None:
        """``reconnect`` opens a new transport to the same service: when a server that said it is
        stopping (``going_away``, then 1001) ends the connection, the session opens another and
        sends again what got no answer (resume.py), up to RESUME_ATTEMPTS times without an answer
        in between. Any other loss, and any with None, ends the session (TtsConnectionError)."""
        self._transport = transport
        self._reconnect = reconnect
        self._log = ResumeLog()
        self._resuming = asyncio.Lock()
        self._fresh = False  # a resumed transport that has not delivered an event yet
        self._failures = 0  # connections opened since the last answer (utterance_end, turn_end, ...)
        self.resumes = 0  # connections opened again so far
        self._going_away = False  # the server said it is stopping; no answer since
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
            if not isinstance(message, Close):
                self._log.sent(message)
            transport = self._transport
            try:
                await transport.send_text(encode_client_message(message))
                return
            except TtsConnectionError as exc:
                if isinstance(message, Close) or not self._may_resume(exc):
                    raise
                broken = exc
        await self._resume(transport, broken)  # the replay carries this message: it is logged

    async def configure(
        self,
        *,
        voice: str | None = None,
        speed: float | None = None,
        format: Format | None = None,
        sample_rate: int | None = None,
        timestamps: bool | None = None,
        lang: str | None = None,
        wait: bool = True,
    ) -> Configured | None:
        """Set the session's defaults. With ``wait`` read until ``configured`` (raising the server's
        refusal, e.g. an unknown voice, as :class:`TtsServerError`); events read meanwhile are kept
        for :meth:`events`. Pass ``wait=False`` while another task is reading :meth:`events` (the
        ``Configured`` event then arrives there). ``lang``: the language later utterances are read
        in (kokoro's codes, voicestream.protocol.LANGUAGES; unset: each voice's own)."""
        await self._send(Configure(voice=voice, speed=speed, format=format, sample_rate=sample_rate,
                                   timestamps=timestamps, lang=lang))
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
        self, text: str, *, id: str | None = None, voice: str | None = None, speed: float | None = None,
        lang: str | None = None,
    ) -> str:
        """Queue ``text`` as one utterance (``lang``: its language, else the session's or the
        voice's); return its id (generated when not given)."""
        uid = id if id is not None else uuid.uuid4().hex[:16]
        await self._send(Speak(text=text, id=uid, voice=voice, speed=speed, lang=lang))
        return uid

    async def delta(self, text: str) -> None:
        """Send raw LLM tokens; the server cuts sentences itself."""
        await self._send(Delta(text=text))

    async def flush(self) -> None:
        """End the turn: the server answers ``turn_end`` after the turn's last audio."""
        await self._send(Flush())

    async def cancel(self, ids: Iterable[str] | None = None) -> None:
        """Barge-in: drop queued work and audio; the server answers ``cancelled``. With ``ids``,
        only those utterances (the turn goes on)."""
        await self._send(Cancel(ids=tuple(ids) if ids is not None else None))

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
        while True:
            if self._closed:
                raise TtsConnectionError("the session is closed")
            transport = self._transport
            try:
                if self._receive_timeout is None:
                    return await transport.receive()
                try:
                    return await asyncio.wait_for(transport.receive(), self._receive_timeout)
                except TimeoutError:
                    raise TtsTimeoutError(f"nothing received for {self._receive_timeout:g} s") from None
            except TtsTimeoutError:
                raise
            except TtsConnectionError as exc:
                if not self._may_resume(exc):
                    raise
                await self._resume(transport, exc)

    def _may_resume(self, exc: TtsConnectionError) -> bool:
        """A connection we did not close ended: open another when the server said it was stopping
        (the ``going_away`` error, in band; or close 1001/1012), so everything it answered is
        complete. A connection cut without that (a crash, a network cut) may have left an
        utterance half heard: that is the caller's error, not a resume that repeats it."""
        if self._reconnect is None or self._closed:
            return False
        return self._going_away or exc.code in (CloseCode.GOING_AWAY, SERVICE_RESTART)

    async def _resume(self, failed: FrameTransport, cause: TtsConnectionError) -> None:
        """Replace ``failed`` with a new transport and send again what got no answer. One resume at
        a time: a sender and the reader that both saw the same break share it."""
        assert self._reconnect is not None
        async with self._resuming:
            if self._transport is not failed:
                return  # resumed already
            with contextlib.suppress(Exception):
                await failed.close()
            for attempt in range(RESUME_ATTEMPTS):
                if self._failures >= RESUME_ATTEMPTS or self._closed:
                    break
                self._failures += 1
                await asyncio.sleep(RESUME_BACKOFF_S[min(attempt, len(RESUME_BACKOFF_S) - 1)])
                try:
                    transport = await self._reconnect()
                except TtsConnectionError as exc:
                    log.info("resume: reconnecting failed (%s)", exc)
                    continue
                async with self._send_lock:
                    self._transport, self._current, self._fresh = transport, None, True
                    try:
                        for message in self._log.replay():
                            await transport.send_text(encode_client_message(message))
                    except TtsConnectionError as exc:
                        log.info("resume: the new connection broke during the replay (%s)", exc)
                        continue
                self.resumes += 1
                log.info("resumed the session on a new connection after: %s", cause)
                return
            raise TtsConnectionError(f"{cause} (gave up after {RESUME_ATTEMPTS} new connections without an answer)",
                                     code=cause.code) from None

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
            if self._fresh:  # the resumed connection's first event: a busy server's close follows
                self._fresh = False
                if isinstance(event, ErrorEvent) and event.code == "busy" and event.id is None:
                    continue
            if isinstance(event, ErrorEvent) and event.code == GOING_AWAY and event.id is None:
                self._going_away = True  # its close follows: resumed from, when we can
                if self._reconnect is not None:
                    continue
            if isinstance(event, (UtteranceEnd, TurnEnd, Cancelled, Pong, Configured)):
                self._failures = 0  # an answer: the session makes progress again
                self._going_away = False
            self._log.received(event)
            if isinstance(event, Configured) and self._log.swallow_configured:
                self._log.swallow_configured -= 1
                continue  # the answer to a replayed configure
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
        lang: str | None = None,
    ) -> AsyncGenerator[TtsEvent, None]:
        """Speak ``sentences`` as one turn, pipelined: each is sent the moment it arrives while the
        caller reads audio. Yields every event up to and including the turn's :class:`TurnEnd`.

        Leaving early cancels the turn; its leftover frames are dropped from later reads.
        """
        sender = asyncio.create_task(self._send_turn(sentences, voice=voice, speed=speed, lang=lang))
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
        self, sentences: AsyncIterable[str] | Iterable[str], *, voice: str | None, speed: float | None,
        lang: str | None = None,
    ) -> None:
        if isinstance(sentences, AsyncIterable):
            async for sentence in sentences:
                if sentence.strip():
                    await self.speak(sentence, voice=voice, speed=speed, lang=lang)
        else:
            for sentence in sentences:
                if sentence.strip():
                    await self.speak(sentence, voice=voice, speed=speed, lang=lang)
        await self.flush()

    async def _abandon_turn(self) -> None:
        """Cancel a turn nobody is reading; drop its frames up to the ``cancelled`` answer. When the
        cancel cannot be sent, the session is closed: its leftover frames would otherwise be read as
        the next turn's."""
        try:
            await asyncio.wait_for(self.cancel(), timeout=2.0)
        except (TtsError, OSError, TimeoutError):
            await self.close()
            return
        self._skip_to_cancelled += 1
        self._pending.clear()
