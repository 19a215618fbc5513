"""Text to phonemes with kokoro's own pipeline (``KPipeline(model=False)``), one per language.

For English, misaki's lexicon and spaCy tagger, espeak-ng for words it does not know, and
``en_tokenize``'s split of long text into pieces of at most 510 phonemes at punctuation. The
other languages (languages.py says which library reads each) go through g2p_other.py, which
cuts their text so nothing is truncated and finds their words. Both engines share one
Phonemizer, so they hear the same phonemes.

Text normalization (the ``normalize`` package: what an LLM writes, as a person reads it) runs
first (all its rules for English; markdown's and grouped numbers' elsewhere), and :func:`sourced`
points the words it wrote back at the text they stand for. Guards
then stand between the text and misaki, all in :func:`readable`, which only adds spaces:
:func:`read_long_numbers` (misaki reads a number by name through num2words, which raises from about
307 digits) and :func:`split_long_runs` (misaki's time on a run of characters without a space is
cubic in its parts). :class:`G2PNotes`: espeak's
``phonemizer`` logs a warning for every word misaki did not know; they become one line per text.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from kokoro import KPipeline
from misaki.en import subtokenize

from voicestream.protocol import voice_language
from voicestream.protocol.normalization import NORMALIZE_ALL, Normalization

from . import g2p_other
from .engines.base import MAX_PHONEMES
from .languages import READERS, english_rules
from .normalize import Normalized, normalize
from .words import ChunkWord, chunk_words

REPO_ID = "hexgrad/Kokoro-82M"
# JSON may carry lone UTF-16 surrogates ("\ud800"); spaCy cannot encode them and would fail the
# whole text. Each becomes U+FFFD (one character for one, so word offsets still hold).
_SURROGATES = re.compile("[\ud800-\udfff]")

log = logging.getLogger(__name__)

# misaki reads a number by name with num2words (OverflowError from about 307 digits; int() itself
# refuses 4300), a decimal through a float (digits lost past 15). A number with more digits than
# this is read digit by digit instead ("3.1 4 1 5 ...", "9 9 9 ..."), its comma groups kept apart.
MAX_NUMBER_DIGITS = 15
_COMMAS = ",\ufe10\ufe50\uff0c"  # what misaki's NFKC folds to "," and to "."
_SEPARATORS = frozenset(_COMMAS + ".\u2024\ufe52\uff0e")
_COMMA_RUNS = re.compile(f"([{_COMMAS}]+)")


@functools.lru_cache(maxsize=4096)
def _digits(char: str) -> int:
    """How many digits misaki reads in ``char`` (it NFKC-folds each word: "９" is 9, "⑳" is 20)."""
    return sum(c.isdigit() for c in unicodedata.normalize("NFKC", char))


def _numbers(text: str) -> Iterator[tuple[int, int]]:
    """[start, end) of each run of digits in ``text``, with the commas and points between them."""
    start = end = -1
    for i, char in enumerate(text):
        if _digits(char):
            start, end = (i if start < 0 else start), i + 1
        elif start >= 0 and char not in _SEPARATORS:
            yield start, end
            start = -1
    if start >= 0:
        yield start, end


def _apart(number: str) -> str:
    """A space between each two adjacent digits, when there are too many to read as one number."""
    if sum(map(_digits, number)) <= MAX_NUMBER_DIGITS:
        return number
    return "".join(c + " " if _digits(c) and _digits(n) else c for c, n in zip(number, number[1:] + " "))


def read_long_numbers(text: str) -> str:
    """``text`` with each number of more than MAX_NUMBER_DIGITS digits made readable: split at its
    commas ("1, 000, 000"), and a part still too long digit by digit. Only spaces are added, so
    each word G2P sees is still in the client's text (word offsets hold)."""
    out: list[str] = []
    done = 0
    for start, end in _numbers(text):
        number = text[start:end]
        if sum(map(_digits, number)) > MAX_NUMBER_DIGITS:
            parts = _COMMA_RUNS.split(number)  # numbers, with the commas between them at odd places
            out += [text[done:start], *(p + " " if i % 2 else _apart(p) for i, p in enumerate(parts))]
            done = end
    return "".join(out) + text[done:] if out else text


# misaki reads a run of characters without a space as one word, trying each span of its parts
# (subtokens: "a1b2" is a, 1, b, 2) against its lexicon: cubic in their number (a run of 5 000
# emoji held G2P for minutes, "a1" x 5 000 for hours). A longer run gets a space every this many.
MAX_SUBTOKENS = 8
_RUNS = re.compile(r"\S+")


def _split_run(match: re.Match[str]) -> str:
    run = match.group()
    subtokens = subtokenize(run)  # misaki's own split, so the count is the one it pays for
    if len(subtokens) <= MAX_SUBTOKENS:
        return run
    parts: list[str] = []
    cut = at = 0
    for i, sub in enumerate(subtokens):
        found = run.find(sub, at)  # each is a piece of the run, in order
        at = found if found >= 0 else at
        if i and i % MAX_SUBTOKENS == 0:
            parts.append(run[cut:at])
            cut = at
        at += len(sub)
    return " ".join([*parts, run[cut:]])


def split_long_runs(text: str) -> str:
    """``text`` with a space after every MAX_SUBTOKENS parts of a run without one."""
    return _RUNS.sub(_split_run, text)


def readable(text: str, *, english: bool = True) -> str:
    """What G2P is given for ``text``: lone surrogates replaced, spaces added where its time or
    its number reading would fail (each word it sees is still in ``text``, so offsets hold). Runs
    are split for misaki's English reader only: a space inside a Japanese or Chinese sentence
    would change how it is read, and their readers are not cubic in a run's length."""
    text = read_long_numbers(_SURROGATES.sub("\ufffd", text))
    return split_long_runs(text) if english else text


class Sourcer:
    """Points G2P's words back at the text normalization was given: a word found (in order) in
    the normalized text gets ``source`` when it does not stand for itself (normalization wrote it)."""

    def __init__(self, normalized: Normalized) -> None:
        self._normalized = normalized
        self._cursor = 0

    def word(self, word: ChunkWord) -> ChunkWord:
        norm = self._normalized
        at = norm.text.find(word.text, self._cursor) if word.text else -1
        if at < 0:
            return word
        self._cursor = at + len(word.text)
        start, end = norm.origin(at, self._cursor)
        if norm.source[start:end] == word.text:
            return word
        # Only its letters and digits count ("d." of "m d." stands for the file name, not its ".").
        ranges = [norm.origin(at + i, at + i + 1) for i, c in enumerate(word.text) if c.isalnum()]
        if ranges:
            start, end = min(s for s, _ in ranges), max(e for _, e in ranges)
        return replace(word, source=norm.source[start:end], source_start=start)


def sourced(chunk: PhonemeChunk, sourcer: Sourcer) -> PhonemeChunk:
    return replace(chunk, words=tuple(sourcer.word(w) for w in chunk.words))


@dataclass
class G2PNotes:
    """The warnings G2P's libraries log while reading one text (espeak's ``words count mismatch``
    for every word misaki did not know), to log as one line instead (:meth:`log`)."""

    messages: list[str] = field(default_factory=list)

    def log(self) -> None:
        messages = list(self.messages)  # a copy: a G2P thread may still add to it
        if messages:
            log.info("g2p: %d warning(s) from the phonemizer reading one text, logged once (first: %s)",
                     len(messages), messages[0])


_capture = threading.local()  # .messages: where the phonemizer's records go during a chunks() call


class _Divert(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        messages = getattr(_capture, "messages", None)
        if messages is None:
            return True
        messages.append(record.getMessage())
        return False


# espeak's backend logs through this logger (phonemizer.logger.get_logger resets its handlers, not
# its filters): its records during a chunks() call go to that call's notes instead.
logging.getLogger("phonemizer").addFilter(_Divert())


# A sentence end in G2P's output: terminal punctuation (closing quotes/brackets kept with it), then a
# space. G2P has already spoken abbreviations, numbers and URLs as words, so a "." here ends a sentence.
_SENTENCE_END = re.compile(r"[.!?…]+[”\"’)\]]*(?=\s)")


def sentence_spans(phonemes: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence in a phoneme chunk, without the spaces around it."""
    spans, start = [], 0
    for end in (*(m.end() for m in _SENTENCE_END.finditer(phonemes)), len(phonemes)):
        part = phonemes[start:end]
        lead = len(part) - len(part.lstrip())
        if part.strip():
            spans.append((start + lead, start + len(part.rstrip())))
        start = end
    return spans


def sentence_jobs(phonemes: str) -> list[str]:
    """One phoneme chunk as one model job per sentence in it, so a ``speak`` holding several
    sentences still streams sentence by sentence and shares the model fairly (the text itself is
    not cut again: see docs/architecture.md)."""
    return [phonemes[start:end] for start, end in sentence_spans(phonemes)]


def language_of(voice: str, lang: str | None = None) -> str:
    """The language ``voice`` reads in: ``lang`` when given, else the one its name starts with."""
    return lang if lang is not None else voice_language(voice)


@dataclass(frozen=True, kw_only=True)
class PhonemeChunk:
    """One model input: its phonemes (1..510) and the words they spell (for word timestamps)."""

    phonemes: str
    words: tuple[ChunkWord, ...] = ()


def chunk_jobs(chunk: PhonemeChunk) -> list[PhonemeChunk]:
    """:func:`sentence_jobs` of a chunk, each with the words inside it (offsets into its phonemes)."""
    return [
        PhonemeChunk(phonemes=chunk.phonemes[start:end], words=tuple(
            replace(w, phoneme_start=w.phoneme_start - start, phoneme_end=w.phoneme_end - start)
            for w in chunk.words if start <= w.phoneme_start and w.phoneme_end <= end
        ))
        for start, end in sentence_spans(chunk.phonemes)
    ]


class Phonemizer:
    """Thread-safe G2P; one misaki pipeline per language, built on first use."""

    def __init__(self) -> None:
        self._pipelines: dict[str, KPipeline] = {}
        self._lock = threading.Lock()

    def _pipeline(self, lang: str) -> KPipeline:
        pipeline = self._pipelines.get(lang)
        if pipeline is None:
            pipeline = KPipeline(lang_code=lang, repo_id=REPO_ID, model=False)
            self._pipelines[lang] = pipeline
        return pipeline

    def phonemize(self, text: str, *, voice: str, lang: str | None = None) -> list[str]:
        """Phoneme chunks for ``text``, each 1..510 long; empty when nothing is speakable."""
        return [chunk.phonemes for chunk in self.chunks(text, voice=voice, lang=lang)]

    def chunks(
        self, text: str, *, voice: str, lang: str | None = None, notes: G2PNotes | None = None,
        options: Normalization = NORMALIZE_ALL,
    ) -> list[PhonemeChunk]:
        """Like :meth:`phonemize`, with each chunk's words and their places in its phonemes.
        ``lang``: the language to read in (None: the voice's; the routes have checked it is served:
        languages.resolve_language). ``notes``: where the libraries' warnings go (to log once for
        many calls); without it they are logged as one line for this call. ``options``: which
        normalization rules apply (of those the language has: normalize.normalize)."""
        code = language_of(voice, lang)
        normalized = normalize(text, options, lang=code)
        sourcer = Sourcer(normalized)
        text = readable(normalized.text, english=english_rules(code))
        messages: list[str] = []
        with self._lock:  # spaCy and misaki keep per-call state
            _capture.messages = messages
            try:
                pipeline = self._pipeline(code)
                return [sourced(chunk, sourcer) for chunk in self._read(pipeline, code, text)]
            finally:
                _capture.messages = None
                if notes is None:
                    G2PNotes(messages).log()
                else:
                    notes.messages.extend(messages)

    @staticmethod
    def _read(pipeline: KPipeline, code: str, text: str) -> list[PhonemeChunk]:
        if english_rules(code):  # misaki's English: tokens, so words come from them
            return [
                PhonemeChunk(phonemes=result.phonemes[:MAX_PHONEMES],
                             words=chunk_words(result.tokens or (), result.phonemes[:MAX_PHONEMES]))
                for result in pipeline(text, voice=None, split_pattern=None)
                if result.phonemes
            ]
        spaces = READERS[code].spaces
        return [
            PhonemeChunk(phonemes=phonemes, words=g2p_other.piece_words(piece, phonemes, spaces=spaces))
            for piece, phonemes in g2p_other.fitted(text, lambda piece: str(pipeline.g2p(piece)[0]))
        ]
