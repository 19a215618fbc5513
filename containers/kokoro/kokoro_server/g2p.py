"""Text to phonemes with misaki, through kokoro's own pipeline so chunking matches the model.

kokoro's ``KPipeline(model=False)`` runs only G2P: misaki's English lexicon and spaCy tagger,
espeak-ng for words it does not know, and ``en_tokenize``'s split of long text into pieces of at
most 510 phonemes at punctuation. Both engines share it, so they hear the same phonemes.
"""

from __future__ import annotations

import threading

from kokoro import KPipeline

from .engines.base import MAX_PHONEMES

REPO_ID = "hexgrad/Kokoro-82M"
# Kokoro voice names start with their language: a = American English, b = British English.
# Other languages need misaki extras this image does not carry; they are read as American English
# (the packaged Japanese voices, for one, speak English text that way).
_LANGS = ("a", "b")


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
