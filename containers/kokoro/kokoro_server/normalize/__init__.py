"""Text normalization: what an LLM writes, rewritten into what a person would read aloud.

Runs on each piece of text after sentence cutting and before G2P, on every route. Two passes of
table-driven rules (:mod:`.markdown`, then :mod:`.rules`), each rule in a group a client can switch
off (``normalize`` in the protocol: voicestream.protocol.normalization). The result keeps, for
every character it hands to G2P, the range of the client's text it stands for
(:class:`Normalized`), so word timestamps point back at what was sent: all the words of "$1,299.99"
point at those nine characters. docs/normalization.md lists every rule and why it reads so.

The rules are English's: other languages get markdown's (which only drop markup) and, where
espeak-ng reads them, :mod:`.digits` (grouped and decimal numbers); nothing else rewrites their text.
"""

from __future__ import annotations

from voicestream.protocol.normalization import NORMALIZE_ALL, Normalization

from ..languages import english_rules
from . import digits, markdown, rules
from .core import Normalized, Rule, apply, identity

__all__ = ["Normalized", "Rule", "normalize", "RULES"]

RULES: tuple[Rule, ...] = (*markdown.RULES, *rules.RULES)


def _enabled(table: tuple[Rule, ...], options: Normalization) -> tuple[Rule, ...]:
    return tuple(rule for rule in table if options.on(rule.group))


def normalize(text: str, options: Normalization = NORMALIZE_ALL, *, lang: str = "a") -> Normalized:
    """``text`` as a person would read it, with each character's source range; ``lang`` (one of
    Kokoro's codes) other than English: only the rules that hold for it apply."""
    result = identity(text)
    if not options.enabled:
        return result
    first = _enabled(markdown.RULES, options)
    result = apply(apply(result, first), first)  # twice: "**see [the docs](url)**" nests
    second = rules.RULES if english_rules(lang) else digits.RULES.get(lang, ())
    return apply(result, _enabled(second, options))
