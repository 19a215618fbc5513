"""One connection of ``WS /invocations-bidirectional-stream``: many turns, pipelined, cancellable.

Four parts, one job each: the :class:`Reader` receives and validates client frames (through the
protocol's edge, which also owns the AWS sample's shape), :class:`Turns` holds turn and utterance
state and starts each utterance's model work at once, the :class:`Speaker` sends utterances'
audio strictly in order, and the :class:`Outbox` is the bounded queue its one writer drains. A
cancel bumps the outbox's generation, so no audio of a cancelled turn leaves after ``cancelled``.

Nothing a client does holds the server's resources without bound: the outbox holds at most
OUTBOX_FRAMES frames, a send that makes no progress for ``send_timeout_s`` ends the session
(``stalled``: the app closes it with 4002 and aborts the connection), and a session with no
message and nothing to speak for ``idle_timeout_s`` ends (``idle``: 4001).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from starlette.websockets import WebSocket

from voicestream.protocol import (
    MAX_FRAME_BYTES,
    Cancel,
    Cancelled,
    ClientMessage,
    Configure,
    Configured,
    Delta,
    ErrorEvent,
    Flush,
    Ping,
    Pong,
    ServerEdge,
    ServerEvent,
    SessionSettings,
    Speak,
    aws,
    check_audio_format,
)

from .config import Settings
from .languages import names
from .outbox import OUTBOX_FRAMES, STALLED, Outbox
from .reader import CLOSE, DISCONNECT, IDLE, Reader
from .speaker import Speaker
from .synth import Synthesizer
from .turns import Turns

__all__ = ["CLOSE", "DISCONNECT", "DRAINED", "IDLE", "OUTBOX_FRAMES", "STALLED", "Session"]

DRAINED = "drained"  # the server is stopping; the utterance in flight finished (or the budget ran out): 1001
GOING_AWAY = "going_away"  # the error code sent before that close: the client resumes elsewhere
GOING_AWAY_MESSAGE = "server stopping: reconnect and send again what was not spoken"

log = logging.getLogger(__name__)


class Session:
    """Serve one client until it closes, disconnects, or sends ``close``."""

    def __init__(self, *, websocket: WebSocket, synth: Synthesizer, settings: Settings) -> None:
        self._synth = synth
        self._limits = settings
        self._settings = SessionSettings(voice=synth.default_voice)
        edge = ServerEdge()
        self._turns = Turns(synth=synth, limits=settings, owner=self)
        self._reader = Reader(
            websocket=websocket, edge=edge, idle_timeout_s=settings.idle_timeout_s, busy=self._busy,
            handle=self._handle, report=self._control,
        )
        self._outbox = Outbox(
            websocket=websocket, edge=edge, send_timeout_s=settings.send_timeout_s, on_sent=self._reader.touch,
        )
        self._speaker = Speaker(turns=self._turns, outbox=self._outbox, settings=lambda: self._settings)
        self._drain_by: float | None = None  # loop time by which a drain closes the session
        self._draining = asyncio.Event()

    def drain(self, *, by: float) -> None:
        """The server is stopping: finish the utterance being spoken (until loop time ``by`` at
        the latest), start no other, then end with DRAINED. The client sends again, on a new
        connection, whatever got no ``utterance_end``."""
        self._drain_by = by
        self._draining.set()

    async def _drained(self) -> str:
        await self._draining.wait()
        self._speaker.drain()
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(self._speaker.drained.wait(), max(0.0, (self._drain_by or 0.0) - loop.time()))
        except asyncio.TimeoutError:
            log.warning("drain: an utterance was still being spoken at the deadline; it is cut")
        # In band, so it reaches the client through SageMaker too (a close code may not): resume.
        await self._control(ErrorEvent(code=GOING_AWAY, message=GOING_AWAY_MESSAGE))
        await self._outbox.drain(max(0.0, (self._drain_by or 0.0) - loop.time()))
        return DRAINED

    async def run(self) -> str:
        """Serve until the session ends; return how: CLOSE, DISCONNECT, IDLE, STALLED or DRAINED.

        After CLOSE, IDLE and DRAINED the socket is still open (the app closes it with the code)."""
        writer = asyncio.create_task(self._outbox.run(), name="session-writer")
        speaker = asyncio.create_task(self._speaker.run(), name="session-speaker")
        reader = asyncio.create_task(self._reader.run(), name="session-reader")
        drainer = asyncio.create_task(self._drained(), name="session-drain")
        try:
            done, _ = await asyncio.wait({reader, writer, drainer}, return_when=asyncio.FIRST_COMPLETED)
            if drainer in done:
                return DRAINED
            if writer in done:
                if not writer.cancelled() and writer.exception() is None and writer.result() == STALLED:
                    return STALLED
                return DISCONNECT
            if reader.cancelled() or reader.exception() is not None:
                log.error("session reader failed", exc_info=None if reader.cancelled() else reader.exception())
                return DISCONNECT
            outcome = reader.result()
            if outcome in (CLOSE, IDLE):
                self._drop_everything()  # the session ends: nothing more is spoken
                if outcome == IDLE:
                    await self._control(ErrorEvent(
                        code="idle_timeout",
                        message=f"no message for {self._limits.idle_timeout_s:g} s: closing the session",
                    ))
                await self._outbox.drain(1.0)  # but the control frames already queued still go out
            return outcome
        finally:
            for task in (reader, speaker, writer, drainer):
                task.cancel()
            self._drop_everything()
            self._synth.scheduler.forget_owner(self)  # the owner of its model jobs (Turns)
            await asyncio.gather(reader, speaker, writer, drainer, return_exceptions=True)

    def held_bytes(self) -> int:
        """Outgoing bytes held for this client now (bounded: outbox.HELD_BYTES_MAX)."""
        return self._outbox.held_bytes()

    def _busy(self) -> bool:
        """Something is still to be spoken or sent: the session is not idle."""
        return self._turns.busy() or self._outbox.pending()

    async def _control(self, event: ServerEvent) -> None:
        await self._outbox.control(event)

    async def _handle(self, message: ClientMessage) -> None:
        turns, gen = self._turns, self._outbox.generation
        if self._draining.is_set() and isinstance(message, (Speak, Delta, Flush)):
            return  # nothing new starts here: the 1001 close tells the client to send it again
        if isinstance(message, Configure):
            await self._configure(message)
        elif isinstance(message, Speak):
            sample_rate = message.sample_rate if isinstance(message, aws.SampleSpeak) else None
            if isinstance(message, aws.SampleSpeak) and message.request_timestamp is not None:  # refused once too old
                aws.check_fresh(message.request_timestamp, now=time.time(), max_age_s=self._limits.max_request_age_s)
            if sample_rate is not None:
                check_audio_format(self._settings.format, sample_rate)
            turns.count_text(message.text)
            turns.enqueue(message.text, gen=gen, settings=self._settings, utterance_id=message.id,
                          voice=message.voice, speed=message.speed, sample_rate=sample_rate, lang=message.lang)
        elif isinstance(message, Delta):
            turns.count_text(message.text)
            for sentence in turns.cut(message.text):
                turns.enqueue(sentence, gen=gen, settings=self._settings)
        elif isinstance(message, Flush):
            turns.end(gen=gen, settings=self._settings)
        elif isinstance(message, Cancel):
            turn = turns.number
            if message.ids is not None:  # these utterances only; the turn goes on
                await self._control(Cancelled(turn=turn, ids=tuple(turns.drop_ids(message.ids))))
                return
            ids = self._drop_everything()
            turns.next()
            await self._control(Cancelled(turn=turn, ids=tuple(ids)))
        elif isinstance(message, Ping):
            await self._control(Pong())

    async def _configure(self, message: Configure) -> None:
        voice = self._synth.resolve_voice(message.voice) if message.voice else self._settings.voice
        lang = message.lang if message.lang is not None else self._settings.lang
        self._synth.resolve_language(voice, lang)  # refused now, naming the field, if it cannot be read
        fmt, rate = check_audio_format(
            message.format or self._settings.format, message.sample_rate or self._settings.sample_rate
        )
        self._settings = replace(
            self._settings, voice=voice, format=fmt, sample_rate=rate,
            speed=message.speed if message.speed is not None else self._settings.speed,
            timestamps=message.timestamps if message.timestamps is not None else self._settings.timestamps,
            normalize=message.normalize if message.normalize is not None else self._settings.normalize,
            lang=lang,
        )
        limits = self._limits
        await self._control(Configured(
            **self._settings.to_json(),
            voices=tuple(sorted(self._synth.voices)),
            languages=names(self._synth.languages),
            limits={
                "max_text_chars": limits.max_text_chars,
                "max_turn_chars": limits.max_turn_chars,
                "max_queued_utterances": limits.max_queued_utterances,
                "max_frame_bytes": MAX_FRAME_BYTES,
            },
        ))

    def _drop_everything(self) -> list[str]:
        self._outbox.new_generation()
        return self._turns.drop()
