"""A session's speaker: utterances' audio encoded and queued strictly in the order they were spoken."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from voicestream.protocol import (
    ErrorEvent,
    SessionSettings,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
    Words,
)

from .audio import StreamEncoder, encode_off_loop
from .metrics import UtteranceClock
from .outbox import Outbox
from .turns import TurnMark, Turns, TurnStats, Utterance

log = logging.getLogger(__name__)


class Speaker:
    """Take ``turns.work`` in order: an utterance's events and audio, or a ``turn_end``."""

    def __init__(self, *, turns: Turns, outbox: Outbox, settings: Callable[[], SessionSettings]) -> None:
        self._turns = turns
        self._outbox = outbox
        self._settings = settings
        self._speaking = False
        self._draining = False
        self.drained = asyncio.Event()  # draining, and no utterance is being spoken: none will be

    def drain(self) -> None:
        """Finish the utterance being spoken; start no other."""
        self._draining = True
        if not self._speaking:
            self.drained.set()

    async def run(self) -> None:
        while True:
            item = await self._turns.work.get()
            if self._draining:  # nothing after the utterance in flight: the client sends it again elsewhere
                self.drained.set()
                return
            if item.gen != self._outbox.generation or (isinstance(item, Utterance) and item.dropped):
                continue
            if isinstance(item, TurnMark):
                stats = self._turns.stats.pop(item.turn, TurnStats())
                await self._outbox.emit(item.gen, TurnEnd(
                    turn=item.turn, utterances=stats.spoken, audio_ms=round(stats.audio_s * 1000),
                ))
            else:
                self._speaking = True
                try:
                    await self._speak(item)
                finally:
                    self._speaking = False
                if self._draining:
                    self.drained.set()
                    return

    async def _speak(self, utt: Utterance) -> None:
        settings = self._settings()
        outbox = self._outbox
        await outbox.emit(utt.gen, UtteranceStart(id=utt.id, turn=utt.turn, text=utt.text), of=utt)
        rate = utt.sample_rate or settings.sample_rate
        encoder = StreamEncoder(fmt=settings.format, sample_rate=rate)
        clock = UtteranceClock(route="ws", fmt=settings.format)
        audio_s = synthesis_s = 0.0
        first_s: float | None = None  # model time before the first audio: the first window's
        sent = 0
        try:
            async for chunk in utt.speech:
                if self._cancelled(utt):
                    encoder.close()  # cancelled between chunks: free the codec now, not at GC
                    return
                audio_s += chunk.synthesis.seconds
                synthesis_s += chunk.synthesis_s
                first_s = synthesis_s if first_s is None else first_s
                if settings.timestamps and chunk.words:  # before the audio they describe
                    await outbox.emit(utt.gen, Words(id=utt.id, words=tuple(w.wire() for w in chunk.words)), of=utt)
                sent += await outbox.send_audio(utt.gen, await encode_off_loop(encoder, chunk.synthesis.audio), of=utt)
                clock.audio(seconds=chunk.synthesis.seconds, synthesis_s=chunk.synthesis_s)
            if self._cancelled(utt):  # the speech ended because it was cancelled: no end to send
                encoder.close()
                return
            sent += await outbox.send_audio(utt.gen, encoder.finish(), of=utt)
        except asyncio.CancelledError:
            encoder.close()
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return  # this utterance was cancelled; the reader already said so
        except Exception as exc:
            encoder.close()
            utt.speech.cancel()  # its G2P task and queued model jobs stop with it
            log.exception("utterance %s failed", utt.id)
            self._turns.failed(utt)
            await outbox.emit(utt.gen, ErrorEvent(
                code="synthesis_failed", id=utt.id, message=f"synthesis failed: {type(exc).__name__}: {exc}",
            ), of=utt)
            return
        clock.finish()
        self._turns.spoken(utt, audio_s)
        # The utterance stays open (a cancel of the turn lists it) until its end is taken to be
        # sent: each utterance gets exactly one of utterance_end and a place in cancelled's ids.
        await outbox.emit(utt.gen, of=utt, taken=lambda: self._turns.ended(utt), frame=UtteranceEnd(
            id=utt.id, turn=utt.turn, audio_ms=round(audio_s * 1000), synthesis_ms=round(synthesis_s * 1000),
            first_audio_synthesis_ms=round((first_s or 0.0) * 1000), bytes=sent, format=settings.format,
            sample_rate=rate,
        ))

    def _cancelled(self, utt: Utterance) -> bool:
        """The utterance's turn was cancelled, or the utterance by its id."""
        return utt.dropped or utt.gen != self._outbox.generation
