"""The machinery of normalization: rules applied in one left-to-right scan, offsets kept.

A :class:`Rule` is a group name (the client's switch), a regex and what to say for a match: a
string (new words standing for the whole match) or a list of pieces, each new words or a
``(start, end)`` range of the match's text to keep as written (markdown keeps its inner text).
All rules of a pass are one alternation, tried in table order at each position, so the first rule
listed wins where two could match. Every character of the output knows the ``[start, end)`` of
the input it stands for: kept characters their own, new words the whole match they replace.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Piece = str | tuple[int, int]
Speak = Callable[[re.Match[str]], str | Sequence[Piece]]

_NAMED = re.compile(r"\(\?P<\w+>")


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One kind of span an LLM writes (``name``), in its switch's ``group``, and how it is read."""

    name: str
    group: str
    pattern: str
    speak: Speak
    flags: int = 0

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, self.flags)


@dataclass(frozen=True, kw_only=True)
class Normalized:
    """What G2P reads (``text``) for what the client sent (``source``); ``spans[i]`` is the
    ``[start, end)`` of ``source`` that ``text[i]`` stands for."""

    text: str
    source: str
    spans: tuple[tuple[int, int], ...]

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The range of ``source`` that ``text[start:end]`` stands for."""
        if start >= end or start >= len(self.spans):
            at = self.spans[start][0] if start < len(self.spans) else len(self.source)
            return at, at
        covered = self.spans[start:end]
        return min(s for s, _ in covered), max(e for _, e in covered)


def identity(text: str) -> Normalized:
    return Normalized(text=text, source=text, spans=tuple((i, i + 1) for i in range(len(text))))


def _combined(rules: Sequence[Rule]) -> re.Pattern[str]:
    """One alternation of every rule; each rule's own named groups made plain (they would clash)."""
    parts = [f"(?P<r{i}>{_NAMED.sub('(?:', rule.pattern)})" for i, rule in enumerate(rules)]
    flags = 0
    for rule in rules:
        flags |= rule.flags
    return re.compile("|".join(parts), flags)


@functools.lru_cache(maxsize=64)
def _compiled(rules: tuple[Rule, ...]) -> re.Pattern[str]:
    return _combined(rules)


def _padded(words: str, text: str, start: int, end: int) -> str:
    """New words kept apart from a letter or digit they would otherwise touch ("5km")."""
    if not words:
        return words
    if start > 0 and text[start - 1].isalnum() and words[0].isalnum():
        words = " " + words
    if end < len(text) and text[end].isalnum() and words[-1].isalnum():
        words += " "
    return words


def apply(current: Normalized, rules: Sequence[Rule]) -> Normalized:
    """One pass of ``rules`` over ``current.text``; offsets composed with ``current.spans``."""
    if not rules or not current.text:
        return current
    text, spans_in = current.text, current.spans
    combined = _compiled(tuple(rules))
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    done = pos = 0
    while pos < len(text):
        found = combined.search(text, pos)
        if found is None:
            break
        rule = rules[int((found.lastgroup or "r0")[1:])]
        match = rule.regex.match(text, found.start())  # the rule alone, for its own groups
        if match is None or match.end() == match.start():
            pos = found.start() + 1
            continue
        said = rule.speak(match)
        start, end = match.start(), match.end()
        out.append(text[done:start])
        spans.extend(spans_in[done:start])
        whole = (min(s for s, _ in spans_in[start:end]), max(e for _, e in spans_in[start:end]))
        pieces: Sequence[Piece] = [_padded(said, text, start, end)] if isinstance(said, str) else said
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
                spans.extend([whole] * len(piece))
            else:
                out.append(text[piece[0]:piece[1]])
                spans.extend(spans_in[piece[0]:piece[1]])
        done = pos = end
    if not out:
        return current
    out.append(text[done:])
    spans.extend(spans_in[done:])
    return Normalized(text="".join(out), source=current.source, spans=tuple(spans))
