"""Markdown within one piece of text: the markup goes, the words stay (the first pass).

The chunker of the streaming routes already strips markdown as it streams (voicestream.markdown:
it alone sees a code fence that spans pieces). These rules are for text that reaches G2P without
it: ``speak`` messages cut by a client that sends an LLM's text as it is. What a person reads:

* emphasis (``**``, ``*``, ``__``, ``_``, ``~~``), inline-code backticks, heading ``#``, bullet and
  blockquote markers: dropped, their words kept (kept characters keep their own offsets);
* links ``[text](url)``: the text (a listener wants the words, not the address); images: dropped;
* fenced code blocks: dropped, fences included. Code read symbol by symbol is noise to a
  listener, and the screen shows it anyway; a short inline ``code`` span is read, it names a thing;
* table rows ``| a | b |``: the cells, a comma (a pause) between them; rules and delimiter rows: dropped.
"""

from __future__ import annotations

import re

from .core import Piece, Rule

GROUP = "markdown"


def _drop(match: re.Match[str]) -> list[Piece]:
    return []


def _inner(match: re.Match[str]) -> list[Piece]:
    """The first group as written: its characters keep their own offsets."""
    return [match.span(1)]


def _cells(match: re.Match[str]) -> list[Piece]:
    out: list[Piece] = []
    for cell in re.finditer(r"[^|]+", match.group()):
        content = cell.group()
        if not content.strip():
            continue
        lead = len(content) - len(content.lstrip())
        start = match.start() + cell.start() + lead
        if out:
            out.append(", ")
        out.append((start, start + len(content.strip())))
    return out


RULES: tuple[Rule, ...] = (
    Rule(name="code_block", group=GROUP, pattern=r"(?s:```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z))", speak=_drop),
    Rule(name="image", group=GROUP, pattern=r"!\[[^\]\n]*\]\([^)\s]*\)", speak=_drop),
    Rule(name="link", group=GROUP, pattern=r"\[([^\]\n]+)\]\((?:[^()\s]|\([^()\s]*\))*\)", speak=_inner),
    Rule(name="inline_code", group=GROUP, pattern=r"`([^`\n]+)`", speak=_inner),
    Rule(name="bold_italic", group=GROUP, pattern=r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*", speak=_inner),
    Rule(name="bold", group=GROUP, pattern=r"\*\*(?=\S)(.+?)(?<=\S)\*\*", speak=_inner),
    Rule(name="bold_underscores", group=GROUP, pattern=r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)", speak=_inner),
    Rule(name="italic", group=GROUP, pattern=r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\w*])", speak=_inner),
    Rule(name="italic_underscore", group=GROUP, pattern=r"(?<!\w)_(?=[^\s_])([^_\n]+?)(?<=\S)_(?!\w)", speak=_inner),
    Rule(name="strike", group=GROUP, pattern=r"~~(?=\S)(.+?)(?<=\S)~~", speak=_inner),
    Rule(name="rule_line", group=GROUP, pattern=r"^[ \t]*(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$",
         speak=_drop, flags=re.M),
    Rule(name="table_delimiter", group=GROUP, pattern=r"^[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*(?::?-+:?)?[ \t]*$",
         speak=_drop, flags=re.M),
    Rule(name="table_row", group=GROUP, pattern=r"^[ \t]*\|[^\n]*\|[ \t]*$", speak=_cells, flags=re.M),
    Rule(name="heading", group=GROUP, pattern=r"^[ \t]{0,3}#{1,6}[ \t]+", speak=_drop, flags=re.M),
    Rule(name="task_box", group=GROUP, pattern=r"^[ \t]*(?:[-*+][ \t]+)?\[[ xX]\][ \t]+", speak=_drop, flags=re.M),
    Rule(name="bullet", group=GROUP, pattern=r"^[ \t]*[-*+•‣◦▪●][ \t]+", speak=_drop, flags=re.M),
    Rule(name="blockquote", group=GROUP, pattern=r"^[ \t]*(?:>[ \t]?)+", speak=_drop, flags=re.M),
    Rule(name="stray_backticks", group=GROUP, pattern=r"`+", speak=_drop),
    Rule(name="stray_asterisks", group=GROUP, pattern=r"(?<!\d)\*+|\*+(?!\d)", speak=_drop),
)
