"""Word timestamps from Kokoro's own predicted durations.

Kokoro predicts how many frames each input token (phoneme symbol) lasts, then renders exactly that
many frames, so the durations say where each phoneme is in the audio: no forced aligner needed.
Three steps, one per function, so each can be tested alone:

1. :func:`chunk_words`: G2P's tokens (misaki: text, phonemes, whitespace) to the words of one
   phoneme chunk and where each sits in the chunk's phoneme string. A word is a run of tokens with
   no space between them ("don't", "$3.50"), trimmed to the tokens that hold a letter or digit.
2. :class:`TextAligner`: each word's character range in the text the client sent, found in order
   (so markdown stripping or sentence cutting never moves an offset off the user's words); a word
   that normalization wrote is found by the text it stands for (``ChunkWord.source``).
3. :func:`word_timings`: durations (frames per token, both pad tokens included) to milliseconds.
   Frames become samples by the chunk's own ratio (audio length / total frames), so it holds for
   any decoder configuration (600 samples per frame for Kokoro-82M, 25 ms).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from voicestream.protocol import NATIVE_SAMPLE_RATE, WordTime


class Token(Protocol):
    """What misaki's MToken offers (only these three attributes are read)."""

    text: str
    phonemes: str | None
    whitespace: str


@dataclass(frozen=True, kw_only=True)
class ChunkWord:
    """A word of one phoneme chunk: its spelling as G2P saw it, its phonemes' [start, end).
    ``source``: when normalization wrote the word (it is not in the client's text), the text it
    stands for ("$1,299.99" for each of "one thousand ... cents") and ``source_start``, where that
    is in the piece: the words of one span share both, so they share one character range."""

    text: str
    phoneme_start: int
    phoneme_end: int
    source: str | None = None
    source_start: int = -1


@dataclass(frozen=True, kw_only=True)
class PlacedWord:
    """A chunk word with its [char_start, char_end) in the client's text."""

    word: ChunkWord
    char_start: int
    char_end: int


@dataclass(frozen=True, kw_only=True)
class WordTiming:
    """One spoken word: where it is in the audio (ms) and in the text the client sent."""

    text: str
    start_ms: int
    end_ms: int
    char_start: int
    char_end: int

    def shifted(self, ms: int) -> "WordTiming":
        return WordTiming(text=self.text, start_ms=self.start_ms + ms, end_ms=self.end_ms + ms,
                          char_start=self.char_start, char_end=self.char_end)

    def wire(self) -> WordTime:
        """As the protocol carries it (``words`` events)."""
        return WordTime(text=self.text, start_ms=self.start_ms, end_ms=self.end_ms,
                        char_start=self.char_start, char_end=self.char_end)


def _spoken(token: Token) -> bool:
    return any(c.isalnum() for c in token.text)


def chunk_words(tokens: Iterable[Token], phonemes: str) -> tuple[ChunkWord, ...]:
    """The words of a chunk whose phoneme string is ``phonemes`` (kokoro's ``tokens_to_ps``:
    each token's phonemes plus a space after it when it has whitespace, stripped at both ends).
    Empty when the tokens do not lay out to ``phonemes`` (then no timings rather than wrong ones)."""
    layout: list[str] = []
    spans: list[tuple[Token, int, int]] = []
    groups: list[list[int]] = [[]]
    length = 0
    for token in tokens:
        ps = token.phonemes or ""
        spans.append((token, length, length + len(ps)))
        groups[-1].append(len(spans) - 1)
        layout.append(ps + (" " if token.whitespace else ""))
        length += len(layout[-1])
        if token.whitespace:
            groups.append([])
    joined = "".join(layout)
    lead = len(joined) - len(joined.lstrip())
    if joined.strip() != phonemes:
        return ()
    words: list[ChunkWord] = []
    for group in groups:
        spoken = [i for i in group if _spoken(spans[i][0])]
        if not spoken:
            continue
        first, last = spoken[0], spoken[-1]
        text = "".join(spans[i][0].text for i in range(first, last + 1)).strip()
        start = min(max(spans[first][1] - lead, 0), len(phonemes))
        end = min(max(spans[last][2] - lead, start), len(phonemes))
        words.append(ChunkWord(text=text, phoneme_start=start, phoneme_end=end))
    return tuple(words)


class TextAligner:
    """Finds words in the client's text in order, from where the last one ended.

    Given the text the pieces were cut from, offsets point into it; given None, into the pieces
    as :meth:`extend` adds them, joined by single spaces."""

    def __init__(self, text: str | None) -> None:
        self._given = text is not None
        self._text = text or ""
        self._cursor = 0
        self._last: tuple[str, int, int, int] | None = None  # source, source_start, char range of the last span

    def extend(self, piece: str) -> None:
        self._last = None  # source_start counts within one piece
        if not self._given:
            self._text = f"{self._text} {piece}" if self._text else piece

    def place(self, words: Iterable[ChunkWord]) -> tuple[PlacedWord, ...]:
        """Each word with its character range; a word whose spelling is not in the text (G2P
        rewrote it) gets the empty range at the cursor."""
        placed = []
        for word in words:
            last = self._last
            if word.source is not None and last is not None and last[:2] == (word.source, word.source_start):
                placed.append(PlacedWord(word=word, char_start=last[2], char_end=last[3]))
                continue  # another word of the span just placed: the same characters
            spelling = word.text if word.source is None else word.source
            at = self._text.find(spelling, self._cursor) if spelling else -1
            if at < 0:
                placed.append(PlacedWord(word=word, char_start=self._cursor, char_end=self._cursor))
                continue
            self._cursor = at + len(spelling)
            placed.append(PlacedWord(word=word, char_start=at, char_end=self._cursor))
            if word.source is not None:
                self._last = (word.source, word.source_start, at, self._cursor)
        return tuple(placed)


def phoneme_frame_starts(phonemes: str, durations: np.ndarray, vocab: Mapping[str, int] | None) -> np.ndarray | None:
    """Frame at which each phoneme symbol starts (and, last, the frame after the final one).

    ``durations`` are frames per model token: the start pad, one per symbol the vocab knows (the
    engines drop the others, as kokoro does), the end pad. None when the counts disagree."""
    d = np.asarray(durations, dtype=np.float64).reshape(-1)
    known = np.array([vocab is None or c in vocab for c in phonemes], dtype=bool)
    if d.size != int(known.sum()) + 2 or not np.isfinite(d).all() or (d < 0).any():
        return None
    per_symbol = np.zeros(len(phonemes), dtype=np.float64)
    per_symbol[known] = d[1:-1]
    starts: np.ndarray = d[0] + np.concatenate(([0.0], np.cumsum(per_symbol)))
    return starts


def word_timings(
    placed: Iterable[PlacedWord], *, phonemes: str, durations: np.ndarray | None, samples: int,
    vocab: Mapping[str, int] | None,
) -> tuple[WordTiming, ...]:
    """Millisecond times of each placed word within its chunk's audio (``samples`` long)."""
    if durations is None:
        return ()
    starts = phoneme_frame_starts(phonemes, durations, vocab)
    total = float(np.asarray(durations, dtype=np.float64).sum())
    if starts is None or total <= 0:
        return ()
    ms_per_frame = samples / total / NATIVE_SAMPLE_RATE * 1000.0
    out = []
    for item in placed:
        start = round(starts[item.word.phoneme_start] * ms_per_frame)
        end = round(starts[item.word.phoneme_end] * ms_per_frame)
        out.append(WordTiming(text=item.word.text, start_ms=start, end_ms=max(end, start),
                              char_start=item.char_start, char_end=item.char_end))
    return tuple(out)
