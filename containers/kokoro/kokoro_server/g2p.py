"""Text to phonemes with misaki, through kokoro's own pipeline so chunking matches the model.

kokoro's ``KPipeline(model=False)`` runs only G2P: misaki's English lexicon and spaCy tagger,
espeak-ng for words it does not know, and ``en_tokenize``'s split of long text into pieces of at
most 510 phonemes at punctuation. Both engines share it, so they hear the same phonemes.
"""

from __future__ import annotations

import re
import threading

from kokoro import KPipeline

from .engines.base import MAX_PHONEMES

REPO_ID = "hexgrad/Kokoro-82M"
# Kokoro voice names start with their language: a = American English, b = British English.
# Other languages need misaki extras this image does not carry; they are read as American English
# (the packaged Japanese voices, for one, speak English text that way).
_LANGS = ("a", "b")


# A sentence end in G2P's output: terminal punctuation (closing quotes/brackets kept with it), then a
# space. G2P has already spoken abbreviations, numbers and URLs as words, so a "." here ends a sentence.
_SENTENCE_END = re.compile(r"[.!?…]+[”\"’)\]]*(?=\s)")


def sentence_jobs(phonemes: str) -> list[str]:
    """One phoneme chunk as one model job per sentence in it, so a ``speak`` holding several
    sentences still streams sentence by sentence and shares the model fairly (the text itself is
    not cut again: see docs/architecture.md)."""
    parts, start = [], 0
    for end in _SENTENCE_END.finditer(phonemes):
        parts.append(phonemes[start:end.end()])
        start = end.end()
    parts.append(phonemes[start:])
    return [part for part in (p.strip() for p in parts) if part]


def language_of(voice: str) -> str:
    return voice[0] if voice[:1] in _LANGS else "a"


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
        with self._lock:  # spaCy and misaki keep per-call state
            pipeline = self._pipeline(language_of(voice))
            return [
                result.phonemes[:MAX_PHONEMES]
                for result in pipeline(text, voice=None, split_pattern=None)
                if result.phonemes
            ]
