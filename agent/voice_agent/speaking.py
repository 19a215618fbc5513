"""The speaking loop: one prompt's answer written and spoken at the same time.

The agent's text deltas go to the client at once and through the sentence chunker (early first
fragment on) into ONE pipelined TTS session for the whole turn: sentence N+1 is sent while N's
audio streams back, and the TTS server keeps the audio in order. Three tasks share a turn: the
writer (model -> text events -> chunker -> ``speak``), the reader (TTS events -> audio items), and
the caller draining :meth:`Turn.events`. Everything leaves through one queue, so transports only
translate items to their framing.

A TTS failure never stops the text: it becomes one ``error`` event and the turn goes on silent.
Barge-in (:meth:`Turn.interrupt`) cancels the model gracefully (its ``cancel_signal``) and the TTS
turn (``cancel``); from that moment no text or audio of the turn is emitted, not even what is
already queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace

from strands import Agent
from strands.types.exceptions import ConcurrencyException

from voicestream.chunker import IncrementalSentenceChunker
from voicestream.clients.base import TtsSession
from voicestream.clients.errors import TtsError
from voicestream.clients.events import AudioChunk, Cancelled, ErrorEvent, TurnEnd, UtteranceEnd, Words
from voicestream.protocol import PCM_BYTES_PER_MS

from .events import (
    CLOSING_EVENTS,
    AgentError,
    AgentEvent,
    FirstAudio,
    Interrupted,
    Sentence,
    TextDelta,
    TextEnd,
    TurnStart,
    TurnSummary,
)
from .heard import HeardWords, trim_history
from .messages import PromptRequest
from .model_check import describe_model_failure

log = logging.getLogger(__name__)

# After an interrupt the model and the TTS server get this long to wind down before their
# tasks are cancelled outright; the client already has its ``interrupted`` event by then.
STOP_GRACE_S = 3.0

TtsConnector = Callable[[], Awaitable[TtsSession]]


@dataclass(frozen=True, kw_only=True)
class Audio:
    """One PCM chunk (s16le, 24 kHz, mono) of the turn's speech."""

    turn: int
    seq: int
    utterance_id: str | None
    data: bytes
    t_ms: int


TurnItem = AgentEvent | Audio


class TurnRegistry:
    """What is running, across the app's event loops (SSE turns run on AgentCore's worker loop,
    WebSocket turns on the server's): tests and ``/ping``'s HealthyBusy read it."""

    def __init__(self, *, on_start: Callable[[str], int] | None = None,
                 on_finish: Callable[[int], object] | None = None) -> None:
        self._lock = threading.Lock()
        self._turns: dict[int, int | None] = {}
        self._tts_sessions = 0
        self._next = 0
        self._on_start = on_start
        self._on_finish = on_finish

    def start_turn(self) -> int:
        external = self._on_start("voice_turn") if self._on_start else None
        with self._lock:
            self._next += 1
            self._turns[self._next] = external
            return self._next

    def finish_turn(self, token: int) -> None:
        with self._lock:
            external = self._turns.pop(token, None)
        if external is not None and self._on_finish is not None:
            self._on_finish(external)

    def tts_opened(self) -> None:
        with self._lock:
            self._tts_sessions += 1

    def tts_closed(self) -> None:
        with self._lock:
            self._tts_sessions -= 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {"turns": len(self._turns), "tts_sessions": self._tts_sessions}


class Turn:
    """One answer. Iterate :meth:`events` (once) to run it; :meth:`interrupt` from anywhere on
    the same event loop."""

    def __init__(self, *, number: int, request: PromptRequest, agent: Agent, connect_tts: TtsConnector | None,
                 registry: TurnRegistry, voice: str | None = None) -> None:
        self.number = number
        self.request = request
        self._agent = agent
        self._connect_tts = connect_tts
        self._registry = registry
        self._voice = request.voice or voice
        self._lang = request.lang  # None: the voice's own language (the TTS server decides)
        self._queue: asyncio.Queue[TurnItem | None] = asyncio.Queue()
        self._t0 = time.monotonic()
        self._chunker = IncrementalSentenceChunker(early_first_fragment=True)
        self._tts_task: asyncio.Task[TtsSession] | None = None
        self._session: TtsSession | None = None
        self._reader: asyncio.Task[None] | None = None
        self._tts_dead = connect_tts is None
        self._tts_error: str | None = None
        self.interrupted = False
        self.finished = False
        self._stopping = asyncio.Event()
        # Per-invocation, not Agent.cancel(): that one stays set if the model already finished,
        # and would cancel the conversation's next turn instead.
        self._cancel_model = threading.Event()
        self._text: list[str] = []
        self._sentences = 0
        self._chunks = 0
        self._audio_bytes = 0
        self._ttfa_ms: int | None = None
        self._text_ms: int | None = None
        self._stop_reason: str | None = None
        self._heard = HeardWords()  # the turn's words on its audio clock, for the barge-in
        self._heard_ms: int | None = None
        self._first_audio_at: float | None = None

    def t_ms(self) -> int:
        return int((time.monotonic() - self._t0) * 1000)

    def _emit(self, event: AgentEvent) -> None:
        """Queue an event stamped with the turn and its time; after an interrupt only the
        closing events pass."""
        if self.interrupted and not isinstance(event, CLOSING_EVENTS):
            return
        self._queue.put_nowait(replace(event, turn=self.number, t_ms=self.t_ms()))

    # ---- the caller's side -----------------------------------------------------------------

    async def events(self) -> AsyncIterator[TurnItem]:
        """Run the turn; yield its events and audio until ``end``. Leaving early (a client gone)
        stops everything the turn started."""
        self._t0 = time.monotonic()  # t_ms counts from here, not from a wait behind an interrupted turn
        runner = asyncio.create_task(self._run(), name=f"voice-turn-{self.number}")
        try:
            while True:
                item = await self._queue.get()
                if item is None:
                    return
                if isinstance(item, Audio) and self.interrupted:
                    continue  # queued before the barge-in: never leaves
                yield item
        finally:
            if not runner.done():
                runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner

    async def interrupt(self, *, heard_ms: int | None = None) -> bool:
        """Barge-in. False when the turn had already finished or been interrupted. ``heard_ms``: the
        turn's audio the listener heard (the page knows); None: played in real time since the first audio."""
        if self.finished or self.interrupted:
            return False
        if heard_ms is None and self._first_audio_at is not None:
            heard_ms = round(min((time.monotonic() - self._first_audio_at) * 1000, self._heard.audio_ms))
        self._heard_ms = heard_ms or 0
        self.interrupted = True
        self._stopping.set()
        self._emit(Interrupted())
        self._cancel_model.set()
        if self._session is not None and not self._tts_dead:
            try:
                await asyncio.wait_for(self._session.cancel(), timeout=2.0)
            except (TtsError, OSError, TimeoutError) as exc:
                log.info("turn %d: TTS cancel failed: %s", self.number, exc)
        return True

    def cut_short(self, heard_ms: int) -> bool:
        """The listener stopped the audio after the turn had finished (its audio plays for longer than
        it takes to send): the history keeps what they heard. False if the turn was still running."""
        if not self.finished or self.interrupted:
            return False
        self.interrupted = True
        self._heard_ms = heard_ms
        trim_history(self._agent.messages, self._heard.heard_text(heard_ms))
        return True

    # ---- the turn itself -------------------------------------------------------------------

    async def _run(self) -> None:
        token = self._registry.start_turn()
        try:
            self._emit(TurnStart(mode=self.request.mode, voice=self._voice, lang=self._lang))
            if self._connect_tts is not None:
                self._tts_task = asyncio.create_task(self._open_tts())
            writer = asyncio.create_task(self._write())
            await self._wait_interruptible(writer)
            if not self.interrupted:
                await self._finish_speech()
            if self.interrupted:  # the model has stopped: its answer becomes what was heard of it
                trim_history(self._agent.messages, self._heard.heard_text(self._heard_ms or 0))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug, not an expected failure: report it, end the turn
            log.exception("turn %d failed", self.number)
            self._emit(AgentError(code="internal_error", message=f"{type(exc).__name__}: {exc}"))
        finally:
            await self._close_tts()
            self.finished = True
            self._registry.finish_turn(token)
            self._emit(self._end_event())
            self._queue.put_nowait(None)

    async def _wait_interruptible(self, task: asyncio.Task[None]) -> None:
        """Await ``task``; once interrupted, give it STOP_GRACE_S to wind down, then cancel it."""
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                await asyncio.wait({task}, timeout=STOP_GRACE_S)
        finally:
            stop.cancel()
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _write(self) -> None:
        """Model text -> text events, and (bidi) each completed piece straight to the TTS."""
        batch = self.request.mode == "batch"
        try:
            async for event in self._agent.stream_async(self.request.prompt, cancel_signal=self._cancel_model):
                if "result" in event:
                    self._stop_reason = str(getattr(event["result"], "stop_reason", "") or "") or None
                data = event.get("data")
                if not isinstance(data, str) or not data or self.interrupted:
                    continue
                self._text.append(data)
                self._emit(TextDelta(text=data))
                if not batch:
                    for piece in self._chunker.feed(data):
                        await self._speak(piece)
        except ConcurrencyException:
            self._emit(AgentError(code="busy", message="this conversation is already answering another prompt"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Bedrock refusals, throttling, network: the turn ends early
            message = describe_model_failure(exc, model_id=str(self._agent.model.get_config().get("model_id")))
            log.warning("turn %d: model failed: %s", self.number, message)
            self._emit(AgentError(code="model_error", message=message[:500]))
        if self.interrupted:
            return
        self._text_ms = self.t_ms()
        self._emit(TextEnd(text="".join(self._text), stop_reason=self._stop_reason))
        pieces = self._chunker.feed("".join(self._text)) if batch else []
        for piece in [*pieces, *self._chunker.flush()]:
            await self._speak(piece)

    async def _finish_speech(self) -> None:
        """End the TTS turn and wait for its last audio (or its failure)."""
        session = self._session
        if session is None or self._tts_dead:
            return
        try:
            await session.flush()
        except (TtsError, OSError) as exc:
            self._tts_failed(exc)
            return
        if self._reader is not None:
            await self._wait_interruptible(self._reader)

    # ---- TTS -------------------------------------------------------------------------------

    async def _open_tts(self) -> TtsSession:
        assert self._connect_tts is not None
        session = await self._connect_tts()
        self._registry.tts_opened()
        self._session = session
        # Word timestamps for the page's captions and the barge-in's history. A voice or a language is
        # waited for, so a refusal fails the turn's speech at once; timestamps alone need no answer.
        await session.configure(voice=self._voice, lang=self._lang, timestamps=True,
                                wait=self._voice is not None or self._lang is not None)
        return session

    async def _speak(self, piece: str) -> None:
        self._sentences += 1
        self._emit(Sentence(index=self._sentences, text=piece))
        if self._tts_dead or self.interrupted or self._tts_task is None:
            return
        try:
            session = await self._tts_task
            if self._reader is None:
                self._reader = asyncio.create_task(self._read(session))
            self._heard.utterance(f"{self.number}.{self._sentences}", piece)
            await session.speak(piece, id=f"{self.number}.{self._sentences}")
        except Exception as exc:  # TtsError, OSError, a bad URL: speech stops, text goes on
            self._tts_failed(exc)

    async def _read(self, session: TtsSession) -> None:
        """TTS events -> audio items, until the turn's ``turn_end`` or ``cancelled``."""
        try:
            async for event in session.events():
                if isinstance(event, Words):
                    self._emit(self._heard.words_event(event.id, event.words))
                elif isinstance(event, UtteranceEnd) and not self.interrupted:
                    self._heard.end(event.id)
                elif isinstance(event, AudioChunk):
                    if self.interrupted or not event.data:
                        continue
                    self._heard.audio(event.utterance_id, len(event.data) / PCM_BYTES_PER_MS)
                    if self._ttfa_ms is None:
                        self._ttfa_ms = self.t_ms()
                        self._first_audio_at = time.monotonic()
                        self._emit(FirstAudio())
                    self._chunks += 1
                    self._audio_bytes += len(event.data)
                    self._queue.put_nowait(Audio(turn=self.number, seq=self._chunks, utterance_id=event.utterance_id,
                                                 data=event.data, t_ms=self.t_ms()))
                elif isinstance(event, ErrorEvent):
                    self._emit(AgentError(code="tts_error", message=f"{event.code}: {event.message}",
                                          field=event.field))
                elif isinstance(event, (TurnEnd, Cancelled)):
                    return
        except Exception as exc:
            self._tts_failed(exc)

    def _tts_failed(self, exc: BaseException) -> None:
        if self._tts_dead:
            return
        self._tts_dead = True
        self._tts_error = str(exc) or type(exc).__name__
        log.warning("turn %d: TTS failed: %s", self.number, self._tts_error)
        self._emit(AgentError(code="tts_failed", message=f"speech stopped, the text goes on: {self._tts_error}"[:500]))

    async def _close_tts(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
        if self._tts_task is not None:
            if not self._tts_task.done():
                self._tts_task.cancel()
            try:
                await self._tts_task
            except asyncio.CancelledError:
                pass
            except Exception as exc:
                self._tts_failed(exc)  # never spoke: the connection failure still deserves its event
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._session is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._session.close(), timeout=3.0)
            self._registry.tts_closed()
            self._session = None

    def _end_event(self) -> TurnSummary:
        return TurnSummary(
            mode=self.request.mode,
            interrupted=self.interrupted,
            text_chars=sum(len(t) for t in self._text),
            sentences=self._sentences,
            audio_chunks=self._chunks,
            audio_bytes=self._audio_bytes,
            audio_ms=self._audio_bytes // PCM_BYTES_PER_MS,
            ttfa_ms=self._ttfa_ms,
            text_ms=self._text_ms,
            tts_ok=self._tts_error is None,
            stop_reason="interrupted" if self.interrupted else self._stop_reason,
            heard_ms=self._heard_ms,
        )
