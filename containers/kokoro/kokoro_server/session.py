"""One connection of ``WS /invocations-bidirectional-stream``: many turns, pipelined, cancellable.

Three tasks share a session. The reader parses client frames and queues utterances, starting each
one's G2P and model jobs at once (a :class:`Speech`), so sentence N+1 is on its way while sentence
N still plays. The speaker sends utterances' audio strictly in order. The writer owns the socket;
every outgoing frame passes through its queue tagged with the session's generation, and a cancel
bumps the generation, so no audio of a cancelled turn leaves after the ``cancelled`` frame.

Nothing a client does holds the server's resources without bound: the outbox holds at most
OUTBOX_FRAMES frames, a send that makes no progress for ``send_timeout_s`` ends the session
(``stalled``: the app closes it with 4002 and aborts the connection), and a session with no
message and nothing to speak for ``idle_timeout_s`` ends (``idle``: 4001).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect
from voicestream.chunker import IncrementalSentenceChunker
from voicestream.protocol import (
    MAX_FRAME_BYTES, PROTOCOL_VERSION, Cancel, Close, Configure, Delta, Flush, Ping, ProtocolError,
    SessionSettings, Speak, parse_client_message,
)

from .audio import StreamEncoder, encode_off_loop, validate_format
from .config import Settings
from .synth import Speech, Synthesizer

log = logging.getLogger(__name__)

AUDIO_FRAME_BYTES = 9_600  # 200 ms of 24 kHz s16 mono: small enough to stop fast, big enough to be cheap
OUTBOX_FRAMES = 32  # frames a slow reader may leave unsent before the speaker waits for it

# How a session ended; the app turns each into a close code (docs/protocol.md#close-codes).
CLOSE = "close"  # the client sent `close`: 1000
DISCONNECT = "disconnect"  # the client went away
IDLE = "idle"  # no message and nothing to speak for idle_timeout_s: 4001
STALLED = "stalled"  # the client read nothing for send_timeout_s while audio waited: 4002


@dataclass(eq=False, kw_only=True)
class _Utterance:
    id: str
    turn: int
    text: str
    legacy: bool
    gen: int
    speech: Speech


@dataclass(eq=False, kw_only=True)
class _TurnEnd:
    turn: int
    gen: int


@dataclass(kw_only=True)
class _TurnStats:
    queued: int = 0  # utterances the turn has had, for automatic ids
    spoken: int = 0
    audio_s: float = 0.0


class Session:
    """Serve one client until it closes, disconnects, or sends ``close``."""

    def __init__(self, *, websocket: WebSocket, synth: Synthesizer, settings: Settings) -> None:
        self._ws = websocket
        self._synth = synth
        self._limits = settings
        self._settings = SessionSettings(voice=synth.default_voice)
        self._chunker = IncrementalSentenceChunker()
        self._gen = 0
        self._turn = 1
        self._turn_chars = 0
        self._stats: dict[int, _TurnStats] = {}
        self._open: dict[str, _Utterance] = {}
        self._last_speech: Speech | None = None
        self._work: asyncio.Queue[_Utterance | _TurnEnd] = asyncio.Queue()
        self._outbox: asyncio.Queue[tuple[int | None, Any]] = asyncio.Queue(OUTBOX_FRAMES)
        self._last_active = time.monotonic()  # the last client message, or the last frame sent

    @property
    def owner(self) -> object:
        return self

    async def run(self) -> str:
        """Serve until the session ends; return how: CLOSE, DISCONNECT, IDLE or STALLED.

        After CLOSE and IDLE the socket is still open (the app closes it with the code)."""
        writer = asyncio.create_task(self._write(), name="session-writer")
        speaker = asyncio.create_task(self._speak_all(), name="session-speaker")
        reader = asyncio.create_task(self._read(), name="session-reader")
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
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
                    await self._control({
                        "type": "error", "code": "idle_timeout",
                        "message": f"no message for {self._limits.idle_timeout_s:g} s: closing the session",
                    })
                try:  # but the control frames already queued (errors, cancelled) still go out
                    await asyncio.wait_for(self._outbox.join(), timeout=1.0)
                except asyncio.TimeoutError:
                    pass
            return outcome
        finally:
            for task in (reader, speaker, writer):
                task.cancel()
            self._drop_everything()
            await asyncio.gather(reader, speaker, writer, return_exceptions=True)

    # ---- reader ---------------------------------------------------------------------------

    def _busy(self) -> bool:
        """Something is still to be spoken or sent: the session is not idle."""
        return bool(self._open) or not self._work.empty() or not self._outbox.empty()

    async def _read(self) -> str:
        receiving: asyncio.Future[Any] | None = None
        idle_s = self._limits.idle_timeout_s
        try:
            while True:
                if receiving is None:  # one receive at a time, never cancelled mid-message
                    receiving = asyncio.ensure_future(self._ws.receive())
                wait_s = max(0.05, self._last_active + idle_s - time.monotonic())
                done, _ = await asyncio.wait({receiving}, timeout=wait_s)
                if not done:
                    if self._busy():
                        self._last_active = time.monotonic()
                    elif time.monotonic() - self._last_active >= idle_s:
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
                self._last_active = time.monotonic()
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                if await self._message(raw) == CLOSE:
                    return CLOSE
        finally:
            if receiving is not None:
                receiving.cancel()

    async def _message(self, raw: str | bytes) -> str | None:
        """Handle one client frame; any refusal is an error frame and the session goes on."""
        parsed: Any = None
        try:
            parsed = parse_client_message(raw)
            if isinstance(parsed, Close):
                return CLOSE
            await self._handle(parsed)
        except ProtocolError as exc:
            exc.id = exc.id or getattr(parsed, "id", None)
            await self._control(exc.to_dict())
        except Exception as exc:  # a bug, not the client's fault: say so, keep the session
            log.exception("message handling failed")
            await self._control({"type": "error", "code": "internal_error",
                                 "message": f"internal error: {type(exc).__name__}"})
        return None

    async def _handle(self, message: Any) -> None:
        if isinstance(message, Configure):
            await self._configure(message)
        elif isinstance(message, Speak):
            self._count_turn_text(message.text)
            await self._enqueue(message.text, utterance_id=message.id, voice=message.voice,
                                speed=message.speed, legacy=message.legacy)
        elif isinstance(message, Delta):
            self._count_turn_text(message.text)
            for sentence in self._chunker.feed(message.text):
                await self._enqueue(sentence)
        elif isinstance(message, Flush):
            for sentence in self._chunker.flush():
                await self._enqueue(sentence)
            self._stats.setdefault(self._turn, _TurnStats())
            self._work.put_nowait(_TurnEnd(turn=self._turn, gen=self._gen))
            self._next_turn()
        elif isinstance(message, Cancel):
            await self._cancel()
        elif isinstance(message, Ping):
            await self._control({"type": "pong"})

    async def _configure(self, message: Configure) -> None:
        voice = self._synth.resolve_voice(message.voice) if message.voice else self._settings.voice
        fmt = message.format or self._settings.format
        rate = message.sample_rate or self._settings.sample_rate
        try:
            validate_format(fmt, rate)
        except ValueError as exc:
            name = str(exc).split(":", 1)[0]
            raise ProtocolError("invalid_field", str(exc), field=name) from None
        self._settings = replace(
            self._settings, voice=voice, format=fmt, sample_rate=rate,
            speed=message.speed if message.speed is not None else self._settings.speed,
        )
        await self._control({
            "type": "configured",
            "protocol_version": PROTOCOL_VERSION,
            **self._settings.to_json(),
            "voices": sorted(self._synth.voices),
            "limits": {
                "max_text_chars": self._limits.max_text_chars,
                "max_turn_chars": self._limits.max_turn_chars,
                "max_queued_utterances": self._limits.max_queued_utterances,
                "max_frame_bytes": MAX_FRAME_BYTES,
            },
        })

    def _count_turn_text(self, text: str) -> None:
        limit = self._limits.max_turn_chars
        if self._turn_chars + len(text) > limit:
            raise ProtocolError(
                "text_too_long", f"text: turn {self._turn} is over the limit of {limit} characters", field="text"
            )
        self._turn_chars += len(text)

    async def _enqueue(
        self, text: str, *, utterance_id: str | None = None, voice: str | None = None,
        speed: float | None = None, legacy: bool = False,
    ) -> None:
        if len(text) > self._limits.max_text_chars:
            raise ProtocolError("text_too_long", f"text: over the limit of {self._limits.max_text_chars} characters", field="text")
        chosen_voice = self._synth.resolve_voice(voice) if voice else self._settings.voice
        stats = self._stats.setdefault(self._turn, _TurnStats())
        uid = utterance_id or f"{self._turn}.{stats.queued + 1}"
        if uid in self._open:
            raise ProtocolError("duplicate_id", f"id: {uid!r} is still being spoken", field="id")
        if len(self._open) >= self._limits.max_queued_utterances:
            raise ProtocolError(
                "queue_full", f"too many utterances queued (limit {self._limits.max_queued_utterances}); "
                "wait for some to end", field="text",
            )
        speech = self._synth.speech(
            owner=self.owner, text=text, voice=chosen_voice,
            speed=speed if speed is not None else self._settings.speed, after=self._last_speech,
        )
        self._last_speech = speech
        utterance = _Utterance(id=uid, turn=self._turn, text=text, legacy=legacy, gen=self._gen, speech=speech)
        self._open[uid] = utterance
        stats.queued += 1
        self._work.put_nowait(utterance)

    def _next_turn(self) -> None:
        self._turn += 1
        self._turn_chars = 0

    async def _cancel(self) -> None:
        ids = list(self._open)
        turn = self._turn
        self._drop_everything()
        self._next_turn()
        await self._control({"type": "cancelled", "turn": turn, "ids": ids})

    def _drop_everything(self) -> None:
        self._gen += 1
        for utterance in self._open.values():
            utterance.speech.cancel()
        self._open.clear()
        self._stats.clear()  # the dropped turns' turn_end frames are never sent
        self._last_speech = None
        self._chunker.reset()
        self._synth.scheduler.cancel_owner(self.owner)
        while not self._work.empty():
            self._work.get_nowait()

    # ---- speaker --------------------------------------------------------------------------

    async def _speak_all(self) -> None:
        while True:
            item = await self._work.get()
            if item.gen != self._gen:
                continue
            if isinstance(item, _TurnEnd):
                stats = self._stats.pop(item.turn, _TurnStats())
                await self._emit(item.gen, {
                    "type": "turn_end", "turn": item.turn, "utterances": stats.spoken,
                    "audio_ms": round(stats.audio_s * 1000),
                })
            else:
                await self._speak(item)

    async def _speak(self, utt: _Utterance) -> None:
        settings = self._settings
        if utt.legacy:
            await self._emit(utt.gen, {"type": "synthesis_start", "request_id": utt.id})
        else:
            await self._emit(utt.gen, {"type": "utterance_start", "id": utt.id, "turn": utt.turn, "text": utt.text})
        encoder = StreamEncoder(fmt=settings.format, sample_rate=settings.sample_rate)
        audio_s = synthesis_s = 0.0
        sent = 0
        try:
            async for chunk in utt.speech:
                if utt.gen != self._gen:
                    return
                audio_s += chunk.synthesis.seconds
                synthesis_s += chunk.synthesis_s
                sent += await self._send_audio(utt.gen, await encode_off_loop(encoder, chunk.synthesis.audio))
            sent += await self._send_audio(utt.gen, encoder.finish())
        except asyncio.CancelledError:
            encoder.close()
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return  # this utterance was cancelled; the reader already said so
        except Exception as exc:
            encoder.close()
            utt.speech.cancel()  # its producer and queued model jobs stop with it
            log.exception("utterance %s failed", utt.id)
            self._open.pop(utt.id, None)
            await self._emit(utt.gen, {
                "type": "error", "code": "synthesis_failed", "id": utt.id,
                "message": f"synthesis failed: {type(exc).__name__}: {exc}",
            })
            return
        self._open.pop(utt.id, None)
        stats = self._stats.setdefault(utt.turn, _TurnStats())
        stats.spoken += 1
        stats.audio_s += audio_s
        end = {
            "audio_ms": round(audio_s * 1000), "synthesis_ms": round(synthesis_s * 1000),
            "bytes": sent, "format": settings.format, "sample_rate": settings.sample_rate,
        }
        if utt.legacy:
            await self._emit(utt.gen, {"type": "synthesis_complete", "request_id": utt.id, **end})
        else:
            await self._emit(utt.gen, {"type": "utterance_end", "id": utt.id, "turn": utt.turn, **end})

    async def _send_audio(self, gen: int, data: bytes) -> int:
        for start in range(0, len(data), AUDIO_FRAME_BYTES):
            await self._emit(gen, data[start:start + AUDIO_FRAME_BYTES])
        return len(data)

    # ---- writer ---------------------------------------------------------------------------

    async def _emit(self, gen: int | None, payload: Any) -> None:
        await self._outbox.put((gen, payload))

    async def _control(self, payload: dict[str, Any]) -> None:
        await self._emit(None, payload)

    async def _write(self) -> str:
        """Send the outbox in order; return STALLED when one send makes no progress for
        send_timeout_s (the client stopped reading: its socket buffers are full)."""
        timeout = self._limits.send_timeout_s
        while True:
            gen, payload = await self._outbox.get()
            try:
                if gen is not None and gen != self._gen:
                    continue  # audio of a cancelled turn: never sent
                if isinstance(payload, bytes):
                    sending = self._ws.send_bytes(payload)
                else:
                    sending = self._ws.send_text(json.dumps(payload))
                try:
                    await asyncio.wait_for(sending, timeout)
                except asyncio.TimeoutError:
                    log.warning("client read nothing for %.1f s: dropping the session", timeout)
                    return STALLED
                self._last_active = time.monotonic()
            finally:
                self._outbox.task_done()

