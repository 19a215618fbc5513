"""The ``lang`` field: which language's G2P reads a text, in kokoro's own one-letter codes.

Kokoro-82M speaks nine languages; a voice's name starts with its language (``jf_alpha`` is
Japanese, ``ef_dora`` Spanish), and that letter picks the G2P unless ``lang`` (``lang_code`` on the
OpenAI route, Kokoro-FastAPI's name) says otherwise. The codes are kokoro's (``KPipeline``'s
``lang_code``), so a client written for Kokoro-FastAPI sends the same values. This module only
checks that a value is one of the nine; the server refuses, naming the field, a language whose G2P
it cannot run (``unsupported_language``), so nothing is ever read as English by accident.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .fields import ProtocolError

#: Kokoro's languages by their one-letter code (kokoro's ``KPipeline`` ``lang_code``).
LANGUAGES: Final = {
    "a": "American English",
    "b": "British English",
    "e": "Spanish",
    "f": "French",
    "h": "Hindi",
    "i": "Italian",
    "j": "Japanese",
    "p": "Brazilian Portuguese",
    "z": "Mandarin Chinese",
}
#: What a voice whose name names no language is read as (hand-added packs: ``my_voice``).
DEFAULT_LANGUAGE: Final = "a"


def describe(codes: Iterable[str]) -> str:
    """``a (American English), j (Japanese)``: codes with their names, for error messages."""
    return ", ".join(f"{code} ({LANGUAGES.get(code, code)})" for code in codes)


def check_lang(value: object, *, name: str = "lang") -> str:
    """One of kokoro's codes; ProtocolError naming ``name`` (and listing the codes) otherwise."""
    if not isinstance(value, str) or value not in LANGUAGES:
        shown = repr(value[:40]) if isinstance(value, str) else type(value).__name__
        raise ProtocolError(
            "invalid_field", f"{name}: {shown} is not a Kokoro language; use one of {describe(LANGUAGES)}",
            field=name,
        )
    return value


def optional_lang(payload: dict[str, object], name: str = "lang") -> str | None:
    return check_lang(payload[name], name=name) if name in payload else None


def voice_language(voice: str) -> str:
    """The language a voice (or a blend: its first part) speaks: its name's first letter when that
    is one of kokoro's codes followed by a gender letter and ``_`` (``jf_alpha``), else DEFAULT_LANGUAGE."""
    if len(voice) > 2 and voice[0] in LANGUAGES and voice[2] == "_":
        return voice[0]
    return DEFAULT_LANGUAGE
