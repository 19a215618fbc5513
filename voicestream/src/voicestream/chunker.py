"""Incremental sentence segmentation for streaming TTS.

An LLM streams tokens; each sentence goes to Kokoro the moment it is complete, so audio starts
while the agent is still writing. A piece is released on the first character that proves its
boundary (or on ``flush``), never later:

* ``.`` ``!`` ``?`` ``…`` (a run of them, then closing quotes/brackets) end a sentence only when
  followed by whitespace; the boundary is proven by the next non-space character: "Hello there."
  waits (it could be "there.com"), the "H" of "How" releases it. So 3.14, v1.2.3, 192.168.0.1,
  a.b@example.co.uk and URLs never split. A lowercase next word means no boundary ("Wait...
  what?", '"Stop!" he said', "approx. two").
* After a single ``.`` the word before decides (see ``_after_period``): titles and Latin
  abbreviations never end a sentence (Dr., Mr., e.g., vs.); "No.", "p.", "Jan." only continue
  before a number; single letters are initials (J. R. R. Tolkien); a number at the start of a
  piece is a list ordinal ("1. Install"). Ambiguous ones (etc., et al., Inc., a.m., U.S., any
  dotted acronym) end a sentence only when the next word is a common sentence opener ("etc.
  The" splits, "U.S. Army" does not). Gluing two sentences costs a little latency (Kokoro still
  pauses at the period); a false split costs a broken phrase, so doubt favours gluing.
* CJK and other scripts' terminators (。！？．, Devanagari ।, Arabic ؟...) need no space
  after them; we wait for the next character only to keep closing quotes/brackets with them.
  Spanish opens with ¿ ¡ (the sentence before still ends at its own mark); French spaces its
  ? ! : ; and closing » ("Bonjour ! » dit-il" is one piece: a closer after a space still closes).
* Every newline ends a piece: LLM output uses line breaks on purpose (list items, headings,
  table rows, paragraphs), so each bullet is a piece even without a terminator.
* Markdown still open may hold text back, boundedly: an unclosed link for at most
  MAX_LINK_CHARS characters, a line start for a few (see voicestream.markdown).

Every decision is made only once the text that decides it has arrived (or at flush), so the
pieces never depend on how the stream was cut into fragments.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Generator, Iterable, Iterator

from voicestream.markdown import NEWLINES, MarkdownStripper

__all__ = ["IncrementalSentenceChunker", "iter_sentences", "aiter_sentences"]

#: Kokoro's context is 510 phonemes. English runs ~1.0-1.3 phonemes per character, so 300
#: characters are ~390 phonemes: a margin for numbers and symbols that expand when spoken
#: ("1,250" -> "one thousand two hundred fifty"). Shorter pieces also start sooner.
DEFAULT_MAX_CHARS = 300
#: An early first clause needs five words (~1.5 s of speech): shorter ones ("Sure,", "Well, so,")
#: sound clipped and get poor intonation, while five words cost only ~150 ms of LLM output.
DEFAULT_MIN_FIRST_FRAGMENT_WORDS = 5
#: A "word" (no space) longer than max_chars is kept whole, so URLs are not cut; but a run of
#: more than 1000 non-space characters (base64, minified JSON) is cut every 1000: nobody can
#: listen to it anyway, and the bound keeps memory flat and feed() linear on such input.
MAX_WORD_CHARS = 1000
#: Longest next word examined after an ambiguous abbreviation ("etc. However"): beyond this it is
#: not a sentence opener, so we stop waiting.
_MAX_OPENER_LEN = 12

_TERMINATORS = ".!?…‽‼⁇⁈⁉"
_CJK_TERMINATORS = "。！？．｡︒﹒﹖﹗।॥؟۔።፧፨။།។៕։"
_CLOSERS = "\"'”’»›)]}」』）】〕〗〙〛》〉＂＇］｝*_"
# Closers that never open anything: after a space they still close the sentence before them
# (French typography spaces them: "« Oui ! »"); a straight quote after a space opens the next one.
_SPACED_CLOSERS = "”’»›)]}」』）】"
# Stripped from the word before a period; markup too, for "**Dr. Smith**" with markdown kept.
_OPENERS = "\"'“‘«‹([{「『（【*_~`"
_NO_SPLIT_BEFORE = ",;:)]}"
_CJK_CHARS = "\u2e80-\u2fff\u3040-\u30ff\u3100-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"

# Never end a sentence (titles, Latin abbreviations).
_ALWAYS_CONTINUE = frozenset(
    "dr mr mrs ms mx prof st mt sgt capt col gen lt cmdr adm rev hon gov sen rep pres fr "
    "vs cf viz approx ca e.g i.e "
    # Kokoro's other languages' titles: Spanish, French, Italian, Portuguese ("Sra. García").
    "sra srta dra ud uds vd vds mme mlle mmes mgr pr sig sigra dott dott.ssa ing avv profa".split()
)
# End a sentence unless a number follows ("No. 5", "p. 42", "Jan. 3").
_BEFORE_NUMBER = frozenset(
    "no nos vol pp fig figs ch sec art eq ex "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
# May end a sentence: only when the next word opens one.
_AMBIGUOUS = frozenset("etc al inc ltd co corp jr sr ph.d esq bros".split())
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # u.s, a.m, u.s.a
_OPENER_WORDS = frozenset(
    "the a an this that these those it its i we you he she they there here but and so then "
    "however also in on at for if when after before as my our your his her their what why how "
    "who where which is are was were do does did can could will would should please note let "
    "yes no now today finally first next meanwhile otherwise thanks sure ok okay all some".split()
)

_NL_CLASS = re.escape(NEWLINES)
_TERM_CLASS = re.escape(_TERMINATORS + _CJK_TERMINATORS)
_CANDIDATE = re.compile(rf"[{_TERM_CLASS}{_NL_CLASS}]")
_CANDIDATE_EARLY = re.compile(rf"[{_TERM_CLASS}{_NL_CLASS},;:]")
_NON_SPACE = re.compile(r"\S")
_NEXT_SIGNIFICANT = re.compile(rf"[^\s]|[{_NL_CLASS}]")
_SPACE = re.compile(r"\s")
_CJK = re.compile(rf"[{_CJK_CHARS}]")
# Forced splits (max_chars): the last clause boundary, else the last space, else a CJK character.
_LAST_CLAUSE = re.compile(r"(?s:.*)(?:[,;:\u2014\u2013](?=\s)|[、，；：](?=[\s\S]))")
_LAST_SPACE = re.compile(r"(?s:.*)(?=\s)")
_LAST_CJK = re.compile(rf"(?s:.*)[{_CJK_CHARS}]")

_WAIT = -1  # resolution needs more text


class IncrementalSentenceChunker:
    """Feed LLM text fragments, get speakable pieces (whole sentences by default) back."""

    __slots__ = ("_early", "_min_words", "_max_chars", "_md", "_buf", "_start", "_scan", "_first")

    def __init__(
        self,
        *,
        early_first_fragment: bool = False,
        min_first_fragment_words: int = DEFAULT_MIN_FIRST_FRAGMENT_WORDS,
        max_chars: int = DEFAULT_MAX_CHARS,
        strip_markdown: bool = True,
    ) -> None:
        """``early_first_fragment``: the first piece of a stream may end at a comma, semicolon or
        colon once it has ``min_first_fragment_words`` words (cuts time to first audio).
        ``max_chars``: longer sentences are split at a clause boundary, else at a space; a single
        word longer than this (a URL) is not cut, up to MAX_WORD_CHARS.
        ``strip_markdown``: drop markup that would be read aloud (see voicestream.markdown).
        """
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        if min_first_fragment_words < 1:
            raise ValueError("min_first_fragment_words must be at least 1")
        self._early = early_first_fragment
        self._min_words = min_first_fragment_words
        self._max_chars = max_chars
        self._md = MarkdownStripper() if strip_markdown else None
        self.reset()

    def reset(self) -> None:
        """Drop buffered text (cancel, barge-in); the next piece is a stream's first again."""
        self._buf = ""
        self._start = 0  # where the current piece begins in _buf
        self._scan = 0  # candidates before this index are resolved as non-boundaries
        self._first = True
        if self._md is not None:
            self._md.reset()

    def feed(self, fragment: str) -> list[str]:
        """The pieces that this fragment completes (often none)."""
        if not fragment:
            return []
        text = self._md.push(fragment) if self._md is not None else fragment
        if not text:
            return []
        buf = self._buf
        n = len(buf) + len(text)
        if self._scan == len(buf) and n <= self._max_chars:  # fast path: nothing to decide
            pattern = _CANDIDATE_EARLY if self._first and self._early else _CANDIDATE
            if pattern.search(text) is None:
                self._buf = buf + text
                self._scan = n
                return []
        return self._segment(text, False)

    def flush(self) -> list[str]:
        """Everything still buffered (end of stream); the chunker is then ready for a new one."""
        text = self._md.finish() if self._md is not None else ""
        pieces = self._segment(text, True)
        self.reset()
        return pieces

    def _segment(self, text: str, final: bool) -> list[str]:
        buf = self._buf + text
        n = len(buf)
        start, scan = self._start, self._scan
        out: list[str] = []
        while True:
            m = _NON_SPACE.search(buf, start)
            if m is None:
                start = n
                break
            start = m.start()
            scan = max(scan, start)
            limit = start + self._max_chars
            pattern = _CANDIDATE_EARLY if self._first and self._early else _CANDIDATE
            m = pattern.search(buf, scan, limit)
            if m is not None:
                i = m.start()
                end, scan = self._resolve(buf, start, i, final)
                if end == _WAIT:
                    scan = i
                    break
                if end == 0 or end - start <= self._max_chars:
                    if end:
                        start = self._emit(buf, start, end, out)
                    continue
            elif n <= limit:  # the piece still fits: wait, or end of stream
                if final:
                    start = self._emit(buf, start, n, out)
                    continue
                scan = n
                break
            # The word runs on to the first space after the window, searched from there: ``scan``
            # may be past spaces ("the... )Hello": a candidate resolved past them), and the search is
            # bounded by MAX_WORD_CHARS.
            end = self._forced_end(buf, start, limit + 1, final)
            if end == _WAIT:
                scan = n
                break
            start = scan = self._emit(buf, start, end, out)
        self._buf = buf[start:]
        self._scan = max(scan - start, 0)
        self._start = 0
        return out

    def _emit(self, buf: str, start: int, end: int, out: list[str]) -> int:
        piece = " ".join(buf[start:end].split())  # stripped, inner runs of blanks collapsed
        if piece:
            out.append(piece)
            self._first = False
        return end

    def _resolve(self, buf: str, start: int, i: int, final: bool) -> tuple[int, int]:
        """Classify the candidate at ``i``: (piece end, next scan), (0, next scan) for no
        boundary, or (_WAIT, i) when the text that decides has not arrived yet."""
        n = len(buf)
        c = buf[i]
        if c in NEWLINES:
            return i, i
        if c in ",;:":  # early first fragment: a clause followed by a space
            if i + 1 == n:
                return (0, i + 1) if final else (_WAIT, i)
            if buf[i + 1].isspace() and len(buf[start : i + 1].split()) >= self._min_words:
                return i + 1, i + 1
            return 0, i + 1
        j = i + 1
        if c in _CJK_TERMINATORS:
            return self._cjk_end(buf, i, final)
        while j < n and buf[j] in _TERMINATORS:
            j += 1
        k = j
        while True:
            while k < n and buf[k] in _CLOSERS:
                k += 1
            if k == n:
                return (k, k) if final else (_WAIT, i)
            if not buf[k].isspace():
                # "3.14", "U.S.", "example.com": no boundary, unless CJK text follows ("好的.我们").
                return (k, k) if _CJK.match(buf, k) else (0, k)
            m = _NEXT_SIGNIFICANT.search(buf, k)
            if m is None:
                return (k, k) if final else (_WAIT, i)
            p = m.start()
            nx = buf[p]
            if nx not in _SPACED_CLOSERS:
                break
            k = p  # French spacing: "« Bonjour ! » dit-il." keeps its closing guillemet
        if nx in NEWLINES:
            return k, k
        if nx.islower() or nx in _NO_SPLIT_BEFORE:
            return 0, k
        if j - i == 1 and c == ".":
            verdict = self._after_period(buf, start, i, p, final)
            if verdict != 1:
                return (_WAIT, i) if verdict == _WAIT else (0, k)
        return k, k

    @staticmethod
    def _cjk_end(buf: str, i: int, final: bool) -> tuple[int, int]:
        """A CJK (or Devanagari, Arabic...) terminator at ``i`` ends the piece after its run of
        marks and closers; at the end of the buffer, wait for one more character (a closer)."""
        n, j = len(buf), i + 1
        while j < n and (buf[j] in _CJK_TERMINATORS or buf[j] in _TERMINATORS):
            j += 1
        while j < n and buf[j] in _CLOSERS:
            j += 1
        if j == n and not final:
            return _WAIT, i
        return j, j

    @staticmethod
    def _after_period(buf: str, start: int, i: int, p: int, final: bool) -> int:
        """1 if the period at ``i`` ends a sentence, 0 if not, _WAIT to see more of the next
        word (which starts at ``p``, uppercase or a symbol)."""
        w = i
        while w > start and not buf[w - 1].isspace():
            w -= 1
        word = buf[w:i].lstrip(_OPENERS).lower()
        if word in _ALWAYS_CONTINUE:
            return 0
        if word in _BEFORE_NUMBER and buf[p].isdigit():
            return 0
        if len(word) == 1 and word.isalpha():  # an initial: "J. R. R. Tolkien"
            return 0
        if word.isdigit() and len(word) <= 3 and w == start:  # list ordinal: "1. Install the CLI."
            return 0
        if word in _AMBIGUOUS or _DOTTED.fullmatch(word):
            q, n = p, len(buf)
            while q < n and buf[q].isalpha() and q - p < _MAX_OPENER_LEN:
                q += 1
            if q == n and not final:
                return _WAIT
            return 1 if buf[p:q].lower() in _OPENER_WORDS else 0
        return 1

    def _forced_end(self, buf: str, start: int, after: int, final: bool) -> int:
        """End of a piece that would exceed max_chars: the last clause boundary in the window,
        else its last space, else after its last CJK character, else the word runs on to the
        first space at or after ``after`` (not cut mid-word unless over MAX_WORD_CHARS)."""
        window_end = start + self._max_chars + 1
        windows = (_LAST_CLAUSE, window_end), (_LAST_SPACE, window_end), (_LAST_CJK, window_end - 1)
        for pattern, end in windows:
            m = pattern.match(buf, start, end)
            if m is not None and m.end() > start:
                return m.end()
        hard = start + max(self._max_chars, MAX_WORD_CHARS)
        m = _SPACE.search(buf, after, hard + 1)
        if m is not None:
            return m.start()
        if len(buf) > hard:
            return hard
        return len(buf) if final else _WAIT


def _pump(options: dict[str, object]) -> Generator[list[str], str | None, None]:
    """The one code path of both wrappers: send fragments, then None for the end."""
    chunker = IncrementalSentenceChunker(**options)  # type: ignore[arg-type]
    fragment = yield []
    while fragment is not None:
        fragment = yield chunker.feed(fragment)
    yield chunker.flush()


def iter_sentences(source: str | Iterable[str], **options: object) -> Iterator[str]:
    """Pieces of a whole text or of an iterable of fragments (options as for the chunker)."""
    pump = _pump(options)
    next(pump)
    for fragment in [source] if isinstance(source, str) else source:
        yield from pump.send(fragment)
    yield from pump.send(None)


async def aiter_sentences(
    source: str | Iterable[str] | AsyncIterable[str], **options: object
) -> AsyncIterator[str]:
    """Async form of :func:`iter_sentences`; also takes an async iterable of fragments."""
    pump = _pump(options)
    next(pump)
    if isinstance(source, str) or not isinstance(source, AsyncIterable):
        for fragment in [source] if isinstance(source, str) else source:
            for piece in pump.send(fragment):
                yield piece
    else:
        async for fragment in source:
            for piece in pump.send(fragment):
                yield piece
    for piece in pump.send(None):
        yield piece
