"""Invariants of the sentence chunker, property-tested: nothing lost or duplicated, pieces that do
not depend on how the stream was cut, and no exception on any text."""

from __future__ import annotations

import os
from typing import TypedDict, Unpack

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from voicestream.chunker import IncrementalSentenceChunker
from voicestream.markdown import MarkdownStripper, strip_markdown

# A few seconds in all on a shared 2-core box; CHUNKER_EXAMPLES=5000 for a deep run.
FAST = settings(
    max_examples=int(os.environ.get("CHUNKER_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Text made of what the chunker reacts to: terminators of several scripts, abbreviations,
# numbers, quotes, markdown, newlines, clause punctuation, CJK.
_TOKENS = [
    "Hello", "there", "the", "The", "U.S.", "Dr.", "etc.", "a.m.", "3.14", "1,000", "J.", "1.",
    "e.g.", "example.com", "a_b", "...", "?!", ".", "!", "?", ",", ";", ":", "—", '"', "'", ")",
    "(", "]", "[", "](", "![", "*", "**", "_", "~~", "`", "```", "#", "> ", "- ", "|", "\\",
    "你好", "。", "！", "」", "।", "؟", "\n", "\n\n", " ", " ", " ", "\t", "\r\n", "x" * 30,
]
texts = st.lists(st.sampled_from(_TOKENS), max_size=40).map("".join) | st.text(max_size=120)
plain_texts = st.lists(
    st.sampled_from([t for t in _TOKENS if not set(t) & set("*_~`[]()#>-|\\!")]), max_size=40
).map("".join)
class Options(TypedDict, total=False):
    """IncrementalSentenceChunker's keyword arguments."""

    early_first_fragment: bool
    min_first_fragment_words: int
    max_chars: int
    strip_markdown: bool


options = st.fixed_dictionaries(
    {
        "early_first_fragment": st.booleans(),
        "min_first_fragment_words": st.integers(1, 6),
        "max_chars": st.sampled_from([8, 25, 60, 300]),
        "strip_markdown": st.booleans(),
    }
)


def run(fragments: list[str], **opts: Unpack[Options]) -> list[str]:
    chunker = IncrementalSentenceChunker(**opts)
    pieces: list[str] = []
    for fragment in fragments:
        pieces += chunker.feed(fragment)
    return pieces + chunker.flush()


def cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({p % (len(text) + 1) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@FAST
@given(texts, st.lists(st.integers(0, 10_000), max_size=12), options)
def test_pieces_do_not_depend_on_fragmentation(text: str, points: list[int], opts: Options) -> None:
    whole = run([text], **opts)
    assert run(list(text), **opts) == whole
    assert run(cut(text, points), **opts) == whole


@FAST
@given(texts, st.lists(st.integers(0, 10_000), max_size=12), options)
def test_pieces_are_stripped_and_non_empty(text: str, points: list[int], opts: Options) -> None:
    for piece in run(cut(text, points), **opts):
        assert piece and piece == piece.strip()


@FAST
@given(texts, st.lists(st.integers(0, 10_000), max_size=8), options)
def test_no_text_lost_or_duplicated(text: str, points: list[int], opts: Options) -> None:
    expected = strip_markdown(text) if opts["strip_markdown"] else text
    assert "".join("".join(run(cut(text, points), **opts)).split()) == "".join(expected.split())


@FAST
@given(plain_texts, st.lists(st.integers(0, 10_000), max_size=8), st.booleans())
def test_markdown_stripping_keeps_plain_text_whole(
    text: str, points: list[int], early: bool
) -> None:
    pieces = run(cut(text, points), early_first_fragment=early, strip_markdown=True)
    assert "".join("".join(pieces).split()) == "".join(text.split())


@FAST
@given(texts, st.lists(st.integers(0, 10_000), max_size=12))
def test_stripper_does_not_depend_on_fragmentation(text: str, points: list[int]) -> None:
    stripper = MarkdownStripper()
    out = "".join(stripper.push(f) for f in cut(text, points)) + stripper.finish()
    assert out == strip_markdown(text)
    if not set(text) & set("`\\"):  # no spoken asterisk, except in code spans or escaped
        assert "*" not in out


@FAST
@given(texts, st.integers(5, 40))
@example("the... )", 5)  # hypothesis found these: a candidate resolved past the space after the word
@example("the... )Hello", 5)
def test_max_chars_is_respected_except_for_long_words(text: str, max_chars: int) -> None:
    for piece in run([text], max_chars=max_chars, strip_markdown=False):
        assert len(piece) <= max_chars or " " not in piece.replace("\t", " ")


@FAST
@given(st.lists(st.text(max_size=12), max_size=20), options)
def test_never_raises_on_arbitrary_fragments(fragments: list[str], opts: Options) -> None:
    chunker = IncrementalSentenceChunker(**opts)
    for fragment in fragments:
        chunker.feed(fragment)
    chunker.flush()
    chunker.feed("".join(fragments))
    chunker.reset()
