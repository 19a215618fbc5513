"""G2P for Kokoro's languages other than English, and where their words are in the phonemes.

kokoro's ``KPipeline`` reads these languages with one call of its G2P per text (espeak-ng, misaki's
``ja`` or ``zh``) that returns a phoneme string and no tokens, and cuts what is over 510 phonemes
off. Here the text is first cut into sentences by the project's one segmenter (a sentence of
Japanese or Chinese reads as ~2-3 phonemes a character); a sentence still over the model's limit is
cut again at a clause, a space or a character, until every piece fits: nothing is cut off.

Words: without tokens, a piece's words are found by laying its text beside its phonemes. Where
the language writes spaces (es, fr, hi, it, pt) each space-separated word of the text is paired
with one of the phonemes when both have as many; where it does not (ja, zh), or the counts differ
(a number read as several words), the unit is the phrase between two punctuation marks, which
G2P keeps ("こんにちは、元気ですか？" -> "koɲɲiʨiβa, ɡeŋkʲi desɨ ka?"); failing that, the
whole piece is one "word". Each unit's text is a substring of the piece, so word offsets point
into the text the client sent (docs/protocol.md#word-timestamps).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator

from voicestream.chunker import iter_sentences

from .engines.base import MAX_PHONEMES
from .words import ChunkWord

# Sentences are cut at this length first (the chunker's default); a piece whose phonemes are still
# over MAX_PHONEMES is cut again at half its length.
PIECE_CHARS = 300
# What G2P writes for punctuation: it separates phrases in the phonemes as the text's marks do.
_PHONEME_MARKS = frozenset(',.!?;:…—–-"“”‘’()«»¿¡')

Reader = Callable[[str], str]  # a piece of text -> its phonemes (KPipeline's g2p, first element)


def pieces(text: str, *, max_chars: int = PIECE_CHARS) -> Iterator[str]:
    """``text`` cut into sentences (longer ones at a clause, space or CJK character)."""
    yield from iter_sentences(text, max_chars=max_chars, strip_markdown=False)


def fitted(text: str, read: Reader) -> Iterator[tuple[str, str]]:
    """(piece, phonemes) for each piece of ``text``, every phonemes 1..MAX_PHONEMES long."""
    for piece in pieces(text):
        yield from _fit(piece, read)


def _fit(piece: str, read: Reader) -> Iterator[tuple[str, str]]:
    phonemes = read(piece).strip()
    if len(phonemes) <= MAX_PHONEMES or len(piece) < 2:
        if phonemes:
            yield piece, phonemes[:MAX_PHONEMES]
        return
    for part in pieces(piece, max_chars=max(1, len(piece) // 2)):
        yield from _fit(part, read)


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith(("P", "S")) or char in _PHONEME_MARKS


def _trimmed(text: str, start: int, end: int, mark: Callable[[str], bool]) -> tuple[int, int]:
    while start < end and (text[start].isspace() or mark(text[start])):
        start += 1
    while end > start and (text[end - 1].isspace() or mark(text[end - 1])):
        end -= 1
    return start, end


def _runs(text: str, apart: Callable[[str], bool]) -> Iterator[tuple[int, int]]:
    """[start, end) of each maximal run of ``text`` with no character ``apart`` says separates."""
    start = -1
    for i, char in enumerate(text):
        if apart(char):
            if start >= 0:
                yield start, i
            start = -1
        elif start < 0:
            start = i
    if start >= 0:
        yield start, len(text)


def _units(
    text: str, *, spaces: bool, mark: Callable[[str], bool], spoken: Callable[[str], bool],
) -> list[tuple[int, int]]:
    """[start, end) of each spoken unit: space-separated words (``spaces``), else the phrases
    between marks; marks and spaces trimmed off each, units with nothing ``spoken`` left out."""
    apart: Callable[[str], bool] = str.isspace if spaces else mark
    units = []
    for run_start, run_end in _runs(text, apart):
        start, end = _trimmed(text, run_start, run_end, mark)
        if any(spoken(c) for c in text[start:end]):
            units.append((start, end))
    return units


def _phoneme_mark(char: str) -> bool:
    return char in _PHONEME_MARKS


Pairs = list[tuple[tuple[int, int], tuple[int, int]]]


def _paired(piece: str, phonemes: str, *, spaces: bool) -> Pairs | None:
    """Each unit of ``piece`` with its unit of ``phonemes``, when both have as many; else None."""
    text_units = _units(piece, spaces=spaces, mark=_is_mark, spoken=str.isalnum)
    phoneme_units = _units(phonemes, spaces=spaces, mark=_phoneme_mark, spoken=str.isalpha)
    return list(zip(text_units, phoneme_units)) if text_units and len(text_units) == len(phoneme_units) else None


def _within(pairs: Pairs, piece: str, phonemes: str) -> Pairs:
    """Each phrase of ``pairs`` as its words where they pair up (a number read as several words
    leaves only its own phrase whole)."""
    out: Pairs = []
    for (ts, te), (ps, pe) in pairs:
        words = _paired(piece[ts:te], phonemes[ps:pe], spaces=True)
        out += [((ts + a, ts + b), (ps + c, ps + d)) for (a, b), (c, d) in words] if words else [((ts, te), (ps, pe))]
    return out


def piece_words(piece: str, phonemes: str, *, spaces: bool) -> tuple[ChunkWord, ...]:
    """The words of one piece and their places in its phonemes (see the module docstring)."""
    pairs = _paired(piece, phonemes, spaces=True) if spaces else None
    if pairs is None:
        pairs = _paired(piece, phonemes, spaces=False)
        if pairs is not None and spaces:
            pairs = _within(pairs, piece, phonemes)
    if pairs is None:
        start, end = _trimmed(piece, 0, len(piece), _is_mark)
        pairs = [((start, end), (0, len(phonemes)))] if end > start else []
    return tuple(ChunkWord(text=piece[ts:te], phoneme_start=ps, phoneme_end=pe) for (ts, te), (ps, pe) in pairs)
