"""What the listener heard of an answer before barging in, from the TTS server's word timestamps.

The agent speaks a turn as utterances in order, each one's audio following the last on one
clock (the turn's audio, in ms). The TTS server says, for each utterance, when each word starts
and ends in its audio and where it is in the utterance's text. Given how much of the turn's
audio had been played when the listener interrupted, :meth:`HeardWords.heard_text` is the text
they heard: every word whose audio had ended, cut at its last character. The conversation
history keeps that, so the model knows where it was cut off.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableSequence
from dataclasses import dataclass, field
from typing import Any

from voicestream.protocol import WordTime as Word  # the TTS server's words event carries these

from .events import TimedWord, TurnWords

CUT_MARK = " …"  # ends an answer the listener cut short, in the conversation history


@dataclass(kw_only=True)
class _Utterance:
    text: str
    words: list[Word] = field(default_factory=list)
    offset_ms: float | None = None  # where its audio starts on the turn's clock; None: no audio yet
    audio_ms: float = 0.0
    ended: bool = False  # all its audio has come


class HeardWords:
    """The utterances of one turn, their words, and their audio on the turn's clock."""

    def __init__(self) -> None:
        self._utterances: dict[str, _Utterance] = {}
        self._order: list[str] = []
        self._clock_ms = 0.0  # audio received so far, all utterances

    @property
    def audio_ms(self) -> float:
        return self._clock_ms

    def utterance(self, utterance_id: str, text: str) -> None:
        if utterance_id not in self._utterances:
            self._order.append(utterance_id)
        self._utterances[utterance_id] = _Utterance(text=text)

    def words(self, utterance_id: str, words: Iterable[Word]) -> None:
        found = self._utterances.get(utterance_id)
        if found is not None:
            found.words.extend(words)

    def words_event(self, utterance_id: str, words: Iterable[Word]) -> TurnWords:
        """Record an utterance's words (from the TTS server's ``words`` event, which comes before
        their audio) and return the agent's ``words`` event: times on the turn's audio clock."""
        words = list(words)
        self.words(utterance_id, words)
        offset = self.offset_ms(utterance_id)
        return TurnWords(utterance_id=utterance_id, words=tuple(
            TimedWord(text=w.text, start_ms=round(offset + w.start_ms), end_ms=round(offset + w.end_ms))
            for w in words
        ))

    def offset_ms(self, utterance_id: str) -> float:
        """Where the utterance's audio starts on the turn's clock: known once its first audio came;
        before that (its words arrive ahead of its audio) it starts where the audio so far ends."""
        found = self._utterances.get(utterance_id)
        return self._clock_ms if found is None or found.offset_ms is None else found.offset_ms

    def audio(self, utterance_id: str | None, ms: float) -> None:
        """``ms`` more audio of ``utterance_id`` (audio of an unknown utterance only moves the clock)."""
        found = self._utterances.get(utterance_id or "")
        if found is not None:
            if found.offset_ms is None:
                found.offset_ms = self._clock_ms
            found.audio_ms += ms
        self._clock_ms += ms

    def end(self, utterance_id: str) -> None:
        """All of the utterance's audio has come (the TTS server's ``utterance_end``)."""
        found = self._utterances.get(utterance_id)
        if found is not None:
            found.ended = True

    def heard_text(self, heard_ms: float) -> str:
        """The text whose audio had been played by ``heard_ms`` on the turn's clock: whole
        utterances, then the heard words of the one playing, ending at the last heard word.
        Audio that never came (the barge-in stopped it) was not heard, whatever ``heard_ms`` says."""
        parts: list[str] = []
        for utterance_id in self._order:
            utt = self._utterances[utterance_id]
            if utt.offset_ms is None:
                break
            played = min(heard_ms, utt.offset_ms + utt.audio_ms)
            if utt.ended and utt.offset_ms + utt.audio_ms <= heard_ms:
                parts.append(utt.text.strip())
                continue
            heard = [w for w in utt.words if utt.offset_ms + w.end_ms <= played]
            if heard:
                parts.append(utt.text[:max(w.char_end for w in heard)].strip())
            break
        return " ".join(p for p in parts if p)


def trim_history(messages: MutableSequence[Any], heard: str) -> None:
    """Make the answer in ``messages`` (Strands' conversation) what the listener heard of it.

    The model's last assistant message holds what it wrote (all of it, or Strands' "Cancelled by
    user" when the writing was cut too); it becomes the heard text with :data:`CUT_MARK`."""
    text = f"{heard}{CUT_MARK}" if heard else CUT_MARK.strip()
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        if message.get("role") == "assistant":
            message["content"] = [{"text": text}]
            return
    messages.append({"role": "assistant", "content": [{"text": text}]})
