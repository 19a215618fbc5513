"""Which library reads each of Kokoro's languages here, and which of them this server can serve.

The G2P is kokoro's own (``KPipeline(lang_code)``): misaki's English lexicon for ``a``/``b``,
espeak-ng (espeakng-loader's bundled library, through phonemizer-fork) for Spanish, French, Hindi,
Italian and Portuguese, misaki's ``ja`` (cutlet: fugashi with unidic-lite's dictionary) and
``zh`` (jieba, pypinyin, cn2an) readers. A language is served when the modules its reader imports
are installed (containers/kokoro/requirements.txt pins them all); one that is not is refused with
``unsupported_language``, naming the field, never read as English.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass

from voicestream.protocol import LANGUAGES, ProtocolError, voice_language
from voicestream.protocol.languages import describe

_ESPEAK = ("espeakng_loader", "phonemizer")


@dataclass(frozen=True, kw_only=True)
class Reader:
    """How one language is read: the library (for docs and errors), the modules it imports, whether
    the server's text normalization rules (written for English) apply, and whether its words are
    separated by spaces (what a ``words`` event's word is: docs/protocol.md#word-timestamps)."""

    library: str
    modules: tuple[str, ...]
    greeting: str  # read at warm-up, so the first request does not pay for loading the reader
    english_rules: bool = False
    spaces: bool = True


READERS: dict[str, Reader] = {
    "a": Reader(library="misaki.en (lexicon + spaCy, espeak-ng fallback)", modules=("spacy", *_ESPEAK),
                greeting="Hello.", english_rules=True),
    "b": Reader(library="misaki.en (lexicon + spaCy, espeak-ng fallback)", modules=("spacy", *_ESPEAK),
                greeting="Hello.", english_rules=True),
    "e": Reader(library="espeak-ng es", modules=_ESPEAK, greeting="Hola."),
    "f": Reader(library="espeak-ng fr-fr", modules=_ESPEAK, greeting="Bonjour."),
    "h": Reader(library="espeak-ng hi", modules=_ESPEAK, greeting="नमस्ते।"),
    "i": Reader(library="espeak-ng it", modules=_ESPEAK, greeting="Ciao."),
    # misaki.ja imports pyopenjtalk at the top, though its default reader (cutlet) never calls it.
    "j": Reader(library="misaki.ja (cutlet: fugashi + unidic-lite)", spaces=False, greeting="こんにちは。",
                modules=("fugashi", "unidic_lite", "jaconv", "mojimoji", "pyopenjtalk")),
    "p": Reader(library="espeak-ng pt-br", modules=_ESPEAK, greeting="Olá."),
    "z": Reader(library="misaki.zh (jieba, pypinyin, cn2an)", spaces=False, greeting="你好。",
                modules=("jieba", "pypinyin", "cn2an", "ordered_set")),
}
assert tuple(READERS) == tuple(LANGUAGES), "every Kokoro language has a reader, in kokoro's order"


@functools.lru_cache(maxsize=1)
def served_languages() -> tuple[str, ...]:
    """The codes whose reader's modules are all installed, in kokoro's order."""
    return tuple(code for code, reader in READERS.items()
                 if all(importlib.util.find_spec(module) is not None for module in reader.modules))


def names(codes: tuple[str, ...]) -> dict[str, str]:
    """Codes -> their names (the ``configured`` event's and ``/v1/audio/voices``' ``languages``)."""
    return {code: LANGUAGES[code] for code in codes}


def resolve_language(
    voice: str, lang: str | None, *, served: tuple[str, ...], field: str = "lang", voice_field: str = "voice",
) -> str:
    """The language to read with: ``lang`` when given, else the voice's. ProtocolError
    ``unsupported_language`` naming ``field`` (or ``voice_field``, when the voice chose it) and
    listing the ``served`` languages when that language cannot be read here."""
    code = lang if lang is not None else voice_language(voice)
    if code in served:
        return code
    reader = READERS[code]
    missing = [m for m in reader.modules if importlib.util.find_spec(m) is None]
    why = (f"its G2P ({reader.library}) needs {', '.join(missing)}, not installed" if missing
           else "this server is set to other languages (KOKORO_LANGUAGES)")
    named = field if lang is not None else voice_field
    raise ProtocolError(
        "unsupported_language",
        f"{named}: {describe([code])} is not served here ({why}); served: {describe(served)}",
        field=named,
    )


def english_rules(code: str) -> bool:
    return READERS[code].english_rules
