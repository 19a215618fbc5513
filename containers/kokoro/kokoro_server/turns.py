"""A session's turn and utterance state: numbering, limits, the open utterances in speaking order.

Each accepted utterance starts its G2P and model jobs at once (a :class:`Speech`, chained after
the previous one), so utterance N+1 is on its way while N still plays; the speaker takes them off
``work`` in order. A ``delta`` stream is cut into sentences here, once; a ``speak`` is the
client's own cut and is spoken as given (docs/architecture.md#sentences-are-cut-once).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from voicestream.chunker import IncrementalSentenceChunker
from voicestream.protocol import ProtocolError, SessionSettings

from .config import Settings
from .speech import Speech
from .synth import Synthesizer


@dataclass(eq=False, kw_only=True)
class Utterance:
    id: str
    turn: int
    text: str
    gen: int
    speech: Speech
    sample_rate: int | None = None  # None: the session's
    dropped: bool = False  # cancelled: none of its frames leaves any more (Outbox checks)
    end_queued: bool = False  # its utterance_end is queued: a cancel by id leaves it be


@dataclass(eq=False, kw_only=True)
class TurnMark:
    """The end of a turn in the work queue: ``turn_end`` goes out when the speaker reaches it."""

    turn: int
    gen: int


@dataclass(kw_only=True)
class TurnStats:
    queued: int = 0  # utterances the turn has had, for automatic ids
    spoken: int = 0
    audio_s: float = 0.0


class Turns:
    """The current turn, its limits, and every utterance not yet fully spoken."""

    def __init__(self, *, synth: Synthesizer, limits: Settings, owner: object) -> None:
        self._synth = synth
        self._limits = limits
        self._owner = owner
        self._chunker = IncrementalSentenceChunker()
        self.number = 1
        self._chars = 0
        self.stats: dict[int, TurnStats] = {}
        self.open: dict[str, Utterance] = {}
        self._last_speech: Speech | None = None
        self.work: asyncio.Queue[Utterance | TurnMark] = asyncio.Queue()

    def busy(self) -> bool:
        return bool(self.open) or not self.work.empty()

    def count_text(self, text: str) -> None:
        """Charge ``text`` to the turn, or refuse it past ``max_turn_chars``."""
        limit = self._limits.max_turn_chars
        if self._chars + len(text) > limit:
            raise ProtocolError(
                "text_too_long", f"text: turn {self.number} is over the limit of {limit} characters", field="text"
            )
        self._chars += len(text)

    def cut(self, delta: str) -> list[str]:
        """The sentences a token delta completes."""
        return self._chunker.feed(delta)

    def enqueue(
        self, text: str, *, gen: int, settings: SessionSettings, utterance_id: str | None = None,
        voice: str | None = None, speed: float | None = None, sample_rate: int | None = None,
        lang: str | None = None,
    ) -> Utterance:
        if len(text) > self._limits.max_text_chars:
            raise ProtocolError("text_too_long", f"text: over the limit of {self._limits.max_text_chars} characters",
                                field="text")
        chosen_voice = self._synth.resolve_voice(voice) if voice else settings.voice
        # The utterance's language, the session's, or the voice's own: refused if not served.
        chosen_lang = self._synth.resolve_language(chosen_voice, lang if lang is not None else settings.lang)
        stats = self.stats.setdefault(self.number, TurnStats())
        uid = utterance_id or f"{self.number}.{stats.queued + 1}"
        if uid in self.open:
            raise ProtocolError("duplicate_id", f"id: {uid!r} is still being spoken", field="id")
        if len(self.open) >= self._limits.max_queued_utterances:
            raise ProtocolError(
                "queue_full", f"too many utterances queued (limit {self._limits.max_queued_utterances}); "
                "wait for some to end", field="text",
            )
        speech = Speech(
            self._synth, owner=self._owner, pieces=[text], voice=chosen_voice,
            speed=speed if speed is not None else settings.speed, after=self._last_speech,
            normalize=settings.normalize, lang=chosen_lang,
        )
        self._last_speech = speech
        utterance = Utterance(id=uid, turn=self.number, text=text, gen=gen, speech=speech, sample_rate=sample_rate)
        self.open[uid] = utterance
        stats.queued += 1
        self.work.put_nowait(utterance)
        return utterance

    def end(self, *, gen: int, settings: SessionSettings) -> None:
        """``flush``: speak what the deltas left, mark the turn's end, start the next turn."""
        for sentence in self._chunker.flush():
            self.enqueue(sentence, gen=gen, settings=settings)
        self.stats.setdefault(self.number, TurnStats())
        self.work.put_nowait(TurnMark(turn=self.number, gen=gen))
        self.next()

    def next(self) -> None:
        self.number += 1
        self._chars = 0

    def spoken(self, utterance: Utterance, audio_s: float) -> None:
        """All its frames and its end are queued: it counts for ``turn_end``, and only a cancel of
        the whole turn can still take it back (until :meth:`ended`)."""
        utterance.end_queued = True
        stats = self.stats.setdefault(utterance.turn, TurnStats())
        stats.spoken += 1
        stats.audio_s += audio_s

    def ended(self, utterance: Utterance) -> None:
        """Its ``utterance_end`` is being sent: it is no longer open."""
        self.open.pop(utterance.id, None)

    def failed(self, utterance: Utterance) -> None:
        self.open.pop(utterance.id, None)

    def drop_ids(self, ids: tuple[str, ...]) -> list[str]:
        """Cancel the named utterances still open (the turn goes on); return those ids, in order."""
        dropped = []
        for uid in dict.fromkeys(ids):
            utterance = self.open.get(uid)
            if utterance is not None and not utterance.end_queued:
                del self.open[uid]
                utterance.dropped = True
                utterance.speech.cancel()
                dropped.append(uid)
        return dropped

    def drop(self) -> list[str]:
        """Cancel every open utterance and its model jobs; return their ids."""
        ids = list(self.open)
        for utterance in self.open.values():
            utterance.dropped = True
            utterance.speech.cancel()
        self.open.clear()
        self.stats.clear()  # the dropped turns' turn_end frames are never sent
        self._last_speech = None
        self._chunker.reset()
        self._synth.scheduler.cancel_owner(self._owner)
        while not self.work.empty():
            self.work.get_nowait()
        return ids
