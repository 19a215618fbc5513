"""Numbers as the espeak-ng languages write them: thousands grouped by "." (or spaces), decimals by ",".

espeak-ng reads digits in each language's own words ("25" is veinticinco in Spanish), but
phonemizer (keeping punctuation) cuts the text at every "." and ",", so "1.500" was read "uno.
quinientos" and "3,5" "tres, cinco". These rules are the only ones, besides markdown's, that apply
outside English (docs/normalization.md#languages): a grouped number loses its separators, and a
decimal comma becomes the language's word for it, so espeak reads "mil quinientos", "tres coma
cinco". Group ``numbers``: ``{"numbers": false}`` leaves them as written.
"""

from __future__ import annotations

import re

from .core import Rule

GROUP = "numbers"
# The decimal comma's name, and what groups thousands, in each language that writes them so.
DECIMAL_COMMA = {"e": "coma", "f": "virgule", "i": "virgola", "p": "vírgula"}
THOUSANDS = {"e": ".", "f": " \u00a0\u202f", "i": ".", "p": "."}


def _rule(lang: str) -> Rule:
    sep = re.escape(THOUSANDS[lang])
    comma = DECIMAL_COMMA[lang]

    def speak(match: re.Match[str]) -> str:
        whole, _, fraction = match.group().partition(",")
        digits = re.sub(rf"[{sep}]", "", whole)
        return f"{digits} {comma} {fraction}" if fraction else digits

    pattern = rf"(?<![\d.,])(?:\d{{1,3}}(?:[{sep}]\d{{3}})+(?:,\d+)?|\d+,\d+)(?![\d]|[.,]\d)"
    return Rule(name=f"grouped_number_{lang}", group=GROUP, pattern=pattern, speak=speak)


RULES: dict[str, tuple[Rule, ...]] = {lang: (_rule(lang),) for lang in DECIMAL_COMMA}
