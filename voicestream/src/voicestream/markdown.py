"""Streaming markdown stripper: turns an LLM's markdown into text a TTS engine can read.

What is removed and why (the listener hears every symbol that reaches Kokoro):

* heading ``#`` markers, blockquote ``>`` markers, bullet markers (``-``, ``*``, ``+``, ``•``...)
  and task-list boxes (``[ ]``, ``[x]``) at the start of a line;
* emphasis: ``*`` and ``_`` runs (inside a word, ``snake_case`` keeps its ``_`` and ``2*3``
  becomes ``2 3``);
  ``~~`` runs (a single ``~`` as in "~5 minutes" stays); inline-code backticks (the code is
  kept, spoken as words);
* links ``[text](url)`` become ``text``; images ``![alt](url)`` are dropped entirely;
* fenced code blocks (three or more backticks or tildes) are dropped, fences included: code read
  symbol by symbol is noise. They are discarded as they stream, so a fence never holds speech
  back; an unclosed fence mutes the rest of the stream (better than reading code aloud);
* thematic breaks (``---``, ``***``, ``===``) and table delimiter rows (``|---|:--:|``) are
  dropped; a table row ``| a | b |`` is spoken as ``a, b`` (the comma gives a pause per cell).

Every newline is kept, because the chunker ends a piece at each line (list items, headings and
table rows are pieces of their own). Decisions that need to see ahead (a ``_`` run, an open
``[``, a line start) wait for just enough text, so the output does not depend on how the stream
was cut into fragments. Waits are bounded: an open link gives up after ``MAX_LINK_CHARS``.
"""

from __future__ import annotations

import re

__all__ = ["MarkdownStripper", "strip_markdown", "NEWLINES"]

#: Characters that end a line (those of str.splitlines).
NEWLINES = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

#: An open ``[`` waits at most this many characters for ``](url)`` to close (and never across a
#: newline) before it is read as plain text. 300 chars is ~1.5 s of LLM output at ~50 tokens/s:
#: long enough for a link with a long URL, short enough that a stray bracket costs one breath.
MAX_LINK_CHARS = 300
#: A table row is held until its newline (it is a piece of its own anyway, so this costs no
#: latency), but at most this many characters, after which it is converted as it stands.
MAX_TABLE_ROW_CHARS = 600
#: A line made only of rule characters (``-*_=:|`` and blanks) is held at most this long.
MAX_RULE_CHARS = 200

_BULLETS = "-*+•‣◦▪●–"
_RULE_CHARS = "-*_=:| \t"
_ASCII_PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_NL_CLASS = re.escape(NEWLINES)
# Characters the body state must look at; everything between them is copied as is.
_SPECIAL = re.compile(rf"[*_~`\[!\\{_NL_CLASS}]")
_CODE_SPECIAL = re.compile(rf"[`{_NL_CLASS}]")
_NOT_BLANK = re.compile(r"[^ \t]")
_NEWLINE = re.compile(rf"[{_NL_CLASS}]")
_DELIMITER_CELL = re.compile(r":?-+:?")

# States of the line machine.
_LINE_START, _BODY, _DROP_LINE, _FENCE_START, _FENCE_LINE = range(5)


def _run_end(buf: str, i: int, ch: str) -> int:
    """Index just past the run of ``ch`` that starts at ``i``."""
    n = len(buf)
    while i < n and buf[i] == ch:
        i += 1
    return i


def _is_rule(line: str) -> bool:
    """``---``, ``* * *``, ``===`` (setext underline) or a table delimiter row ``|--|:-:|``."""
    chars = set(line) - {" ", "\t"}
    if len(chars) == 1 and chars <= set("-*_=") and sum(line.count(c) for c in chars) >= 3:
        return True
    if "-" in chars and "|" in chars and chars <= set("-:|"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        return all(_DELIMITER_CELL.fullmatch(c) for c in cells)
    return False


def _table_row(row: str) -> str:
    """``| a | b |`` -> ``a, b`` (empty cells dropped)."""
    cells = [c.strip() for c in row.split("|")]
    return ", ".join(c for c in cells if c)


class MarkdownStripper:
    """Incremental markdown-to-speech text filter: ``push`` fragments, ``finish`` at the end."""

    __slots__ = ("_buf", "_state", "_fence", "_prev", "_code")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (start of a new stream)."""
        self._buf = ""
        self._state = _LINE_START
        self._fence = ""  # the fence character of the open code block
        self._prev = ""  # the character before the buffer (for the intraword ``_`` rule)
        self._code = False  # inside an inline code span

    def push(self, fragment: str) -> str:
        """Text that this fragment makes final (may be empty while a decision waits)."""
        if self._state == _BODY and not self._buf and not self._code:
            if _SPECIAL.search(fragment) is None:  # fast path: plain prose
                self._prev = fragment[-1:] or self._prev
                return fragment
        self._buf += fragment
        return self._run(False)

    def finish(self) -> str:
        """The rest of the text at end of stream; the stripper is then reset."""
        out = self._run(True)
        self.reset()
        return out

    def _run(self, final: bool) -> str:
        out: list[str] = []
        buf = self._buf
        i = 0
        n = len(buf)
        while i < n:
            state = self._state
            if state == _BODY:
                if self._code:
                    m = _CODE_SPECIAL.search(buf, i)
                else:
                    m = _SPECIAL.search(buf, i)
                if m is None:
                    out.append(buf[i:])
                    i = n
                    break
                j = m.start()
                if j > i:
                    out.append(buf[i:j])
                r = self._special(buf, j, final, out)
                if isinstance(r, tuple):  # the buffer was rewritten (link, image)
                    buf, i = r
                    n = len(buf)
                elif r < 0:
                    i = j
                    break
                else:
                    i = r
            elif state == _LINE_START or state == _FENCE_START:
                started = self._line_start(buf, i, final)
                if started is None:
                    break
                buf, i = started
                n = len(buf)
            else:  # _DROP_LINE / _FENCE_LINE: discard up to the newline
                m = _NEWLINE.search(buf, i)
                if m is None:
                    i = n
                    break
                i = m.end()
                if state == _DROP_LINE:
                    out.append(m.group())
                    self._state = _LINE_START
                else:
                    self._state = _FENCE_START
        if i > 0:
            self._prev = buf[i - 1]
        self._buf = buf[i:]
        return "".join(out)

    def _line_start(self, buf: str, i: int, final: bool) -> tuple[str, int] | None:
        """Consume a line's markdown prefix; ``None`` while the prefix is still ambiguous."""
        m = _NOT_BLANK.search(buf, i)
        if m is None:
            return None if not final else (buf, len(buf))
        j = m.start()
        if self._state == _FENCE_START:
            return self._fence_start(buf, j, final)
        c = buf[j]
        if c in NEWLINES:
            self._state = _BODY
            return buf, j
        if c in _RULE_CHARS:
            k = self._rule(buf, j, final)
            if k is None:
                return None
            if k > j:
                return buf, k
        if c == "|":
            return self._table(buf, j, final)
        k = self._marker(buf, j, final)
        if k is None:
            return None
        if k == j:  # no prefix: the line's text starts here
            self._state = _BODY
        return buf, k

    def _fence_start(self, buf: str, j: int, final: bool) -> tuple[str, int] | None:
        """A line inside a code block: its closing fence, or another line to drop."""
        c = buf[j]
        if c == self._fence:
            end = _run_end(buf, j, c)
            if end == len(buf) and not final:
                return None
            if end - j >= 3:  # closing fence: drop its line, then speak again
                self._state = _DROP_LINE
                return buf, end
        self._state = _FENCE_LINE
        return buf, j

    def _rule(self, buf: str, j: int, final: bool) -> int | None:
        """End of a thematic break or table delimiter row at ``j`` (dropped), ``j`` if it is not one,
        ``None`` to wait (for its newline, at most ``MAX_RULE_CHARS``)."""
        n = len(buf)
        k = j
        while k < n and buf[k] in _RULE_CHARS:
            k += 1
        if k == n and not final and k - j < MAX_RULE_CHARS:
            return None
        if (k == n or buf[k] in NEWLINES) and _is_rule(buf[j:k]):
            self._state = _DROP_LINE
            return k
        return j

    def _table(self, buf: str, j: int, final: bool) -> tuple[str, int] | None:
        """A table row at ``j``, rewritten as its cells once its newline (or the length cap) is seen."""
        n = len(buf)
        m = _NEWLINE.search(buf, j, j + MAX_TABLE_ROW_CHARS)
        if m is None and n - j < MAX_TABLE_ROW_CHARS and not final:
            return None
        end = m.start() if m else min(n, j + MAX_TABLE_ROW_CHARS)
        self._state = _BODY
        return buf[:j] + _table_row(buf[j:end]) + buf[end:], j

    def _marker(self, buf: str, j: int, final: bool) -> int | None:
        """Index past a fence, heading, quote, bullet or task-box marker at ``j`` (``j`` if there is
        none), ``None`` to wait. A fence opens the code block; the other markers keep the line start,
        as a nested prefix may follow (e.g. "# - x")."""
        c = buf[j]
        if c in "`~":
            return self._fence_open(buf, j, final)
        if c == "#":
            return self._heading(buf, j, final)
        if c == ">":
            return j + 1
        if c in _BULLETS:
            return self._after_marker(buf, j, j + 1, final)
        if c == "[":
            if j + 4 > len(buf) and not final:
                return None
            if buf[j : j + 3] in ("[ ]", "[x]", "[X]"):
                return self._after_marker(buf, j, j + 3, final)  # task-list box
        return j

    def _fence_open(self, buf: str, j: int, final: bool) -> int | None:
        """Past an opening code fence at ``j`` (the code block starts), else ``j``; ``None`` to wait."""
        c = buf[j]
        end = _run_end(buf, j, c)
        if end == len(buf) and not final:
            return None
        if end - j >= 3:
            self._fence = c
            self._state = _FENCE_LINE
            return end
        return j

    @staticmethod
    def _heading(buf: str, j: int, final: bool) -> int | None:
        """Past a heading's ``#`` run at ``j`` (1 to 6 of them, then a blank), else ``j``; ``None`` to wait."""
        n = len(buf)
        end = _run_end(buf, j, "#")
        if end == n and not final:
            return None
        if end - j <= 6 and (end == n or buf[end].isspace()):
            return end
        return j

    @staticmethod
    def _after_marker(buf: str, j: int, end: int, final: bool) -> int | None:
        """``end`` if the marker ``buf[j:end]`` is followed by a blank, else ``j``; ``None`` to wait."""
        n = len(buf)
        if end == n and not final:
            return None
        if end < n and buf[end] in " \t":
            return end
        return j

    def _special(self, buf: str, j: int, final: bool, out: list[str]) -> int | tuple[str, int]:
        """Handle the markup character at ``j``; -1 to wait for more text."""
        c = buf[j]
        if c in NEWLINES:
            out.append(c)
            self._state = _LINE_START
            self._code = False
            return j + 1
        if c in "`*_~":
            return self._run_markup(buf, j, final, out)
        if c == "\\":
            return self._escape(buf, j, final, out)
        if c == "!":
            return self._image(buf, j, final, out)
        # c == "["
        link = self._link(buf, j, final)
        if link is None:
            return -1
        if link:
            return buf[:j] + link[0] + buf[link[1] :], j  # the text is processed next
        out.append(c)
        return j + 1

    def _run_markup(self, buf: str, j: int, final: bool, out: list[str]) -> int:
        """A run of backticks (code span), ``*``/``_`` (emphasis) or ``~`` (strikethrough); -1 to wait."""
        n = len(buf)
        c = buf[j]
        end = _run_end(buf, j, c)
        if end == n and not final:
            return -1
        if c == "`":
            self._code = not self._code
        elif c == "~":
            if end - j == 1:
                out.append(c)
        else:
            prev = buf[j - 1] if j > 0 else self._prev
            if prev.isalnum() and end < n and buf[end].isalnum():
                # Inside a word: snake_case keeps its "_"; "2*3" must not become "23".
                out.append(buf[j:end] if c == "_" else " ")
        return end

    @staticmethod
    def _escape(buf: str, j: int, final: bool, out: list[str]) -> int:
        """A backslash escape: the escaped punctuation is spoken, a lone ``\\`` kept; -1 to wait."""
        n = len(buf)
        if j + 1 == n and not final:
            return -1
        if j + 1 < n and buf[j + 1] in _ASCII_PUNCT:
            out.append(buf[j + 1])
            return j + 2
        out.append(buf[j])
        return j + 1

    def _image(self, buf: str, j: int, final: bool, out: list[str]) -> int | tuple[str, int]:
        """``![alt](url)`` at ``j`` is dropped with its alt text; a lone ``!`` is kept; -1 to wait."""
        n = len(buf)
        if j + 1 == n and not final:
            return -1
        if j + 1 < n and buf[j + 1] == "[":
            link = self._link(buf, j + 1, final)
            if link is None:
                return -1
            if link:
                return buf[:j] + buf[link[1] :], j
        out.append("!")
        return j + 1

    @staticmethod
    def _link(buf: str, j: int, final: bool) -> tuple[str, int] | tuple[()] | None:
        """Parse ``[text](url)`` at ``j``: (text, end), () if it is not a link, None to wait."""
        n = len(buf)
        limit = min(n, j + MAX_LINK_CHARS)
        depth = 0
        close = -1
        k = j + 1
        while k < limit:
            ch = buf[k]
            if ch in NEWLINES:
                return ()
            if close < 0:
                if ch == "]":
                    close = k
                    if k + 1 < n and buf[k + 1] != "(":
                        return ()
                    k += 1  # skip the "("
            elif ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    return buf[j + 1 : close], k + 1
                depth -= 1
            k += 1
        if limit == n and n - j < MAX_LINK_CHARS and not final:
            return None
        return ()


def strip_markdown(text: str) -> str:
    """The whole-text form of :class:`MarkdownStripper` (same code, one fragment)."""
    stripper = MarkdownStripper()
    return stripper.push(text) + stripper.finish()
