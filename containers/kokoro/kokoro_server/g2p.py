"""Text to phonemes with misaki, through kokoro's own pipeline so chunking matches the model.

kokoro's ``KPipeline(model=False)`` runs only G2P: misaki's English lexicon and spaCy tagger,
espeak-ng for words it does not know, and ``en_tokenize``'s split of long text into pieces of at
most 510 phonemes at punctuation. Both engines share it, so they hear the same phonemes.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from kokoro import KPipeline

from .engines.base import MAX_PHONEMES
from .words import ChunkWord, chunk_words

REPO_ID = "hexgrad/Kokoro-82M"
# Kokoro voice names start with their language: a = American English, b = British English.
# Other languages need misaki extras this image does not carry; they are read as American English
# (the packaged Japanese voices, for one, speak English text that way).
_LANGS = ("a", "b")
# JSON may carry lone UTF-16 surrogates ("\ud800"); spaCy cannot encode them and would fail the
# whole text. Each becomes U+FFFD (one character for one, so word offsets still hold).
_SURROGATES = re.compile("[\ud800-\udfff]")


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


def language_of(voice: str) -> str:
    return voice[0] if voice[:1] in _LANGS else "a"


@dataclass(frozen=True, kw_only=True)
class PhonemeChunk:
    """One model input: its phonemes (1..510) and the words they spell (for word timestamps)."""

    phonemes: str
    words: tuple[ChunkWord, ...] = ()


def chunk_jobs(chunk: PhonemeChunk) -> list[PhonemeChunk]:
    """:func:`sentence_jobs` of a chunk, each with the words inside it (offsets into its phonemes)."""
    return [
        PhonemeChunk(phonemes=chunk.phonemes[start:end], words=tuple(
            ChunkWord(text=w.text, phoneme_start=w.phoneme_start - start, phoneme_end=w.phoneme_end - start)
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

    def phonemize(self, text: str, *, voice: str) -> list[str]:
        """Phoneme chunks for ``text``, each 1..510 long; empty when nothing is speakable."""
        return [chunk.phonemes for chunk in self.chunks(text, voice=voice)]

    def chunks(self, text: str, *, voice: str) -> list[PhonemeChunk]:
        """Like :meth:`phonemize`, with each chunk's words and their places in its phonemes."""
        text = _SURROGATES.sub("\ufffd", text)
        with self._lock:  # spaCy and misaki keep per-call state
            pipeline = self._pipeline(language_of(voice))
            return [
                PhonemeChunk(
                    phonemes=result.phonemes[:MAX_PHONEMES],
                    words=chunk_words(result.tokens or (), result.phonemes[:MAX_PHONEMES]),
                )
                for result in pipeline(text, voice=None, split_pattern=None)
                if result.phonemes
            ]
