"""G2P takes what LLMs write: hypothesis feeds the Phonemizer (real misaki, spaCy and espeak, in this
process) text made of the things answers hold (long numbers, hashes, base64, code, URLs, markdown,
emoji, math, other scripts, control and invisible characters, very long words) and every text
must come out as phoneme chunks the model can take, never an exception.

Every failure found is kept below as an ``@example``. Two classes, both guarded in g2p.py:
numbers past num2words' ~307 digits or int()'s 4300 (in any digit script or NFKC form, with
commas, decimals, currency, ordinals, signs, in markdown link targets) raised; runs of characters
without a space (emoji, combining marks, "a1a1...", base64) held G2P for minutes to hours, as
misaki's time on one is cubic in its parts. Examples are drawn by fuzz_profile.py: the same on
every run by default (CI never fails by chance); ``KOKORO_FUZZ_EXPLORE=1`` draws new random
ones, ten times as many, each within 10 s, to hunt for new failures.
"""

from __future__ import annotations

import base64
import random
import string
import time

import pytest
from fuzz_profile import EXPLORE, fuzz_settings
from hypothesis import example, given
from hypothesis import strategies as st

from kokoro_server.engines.base import MAX_PHONEMES
from kokoro_server.g2p import MAX_NUMBER_DIGITS, Phonemizer, read_long_numbers, readable
from voicestream.protocol.normalization import NORMALIZE_NONE

pytestmark = pytest.mark.kokoro

EXAMPLES = 300

digits = st.text(alphabet=string.digits, min_size=1, max_size=5_000)
other_digits = st.text(alphabet=st.characters(categories=["Nd", "No"]), min_size=1, max_size=500)
grouped = st.lists(st.integers(0, 999), min_size=2, max_size=200).map(lambda g: ",".join(f"{n:03d}" for n in g))
number = st.one_of(
    digits, other_digits, grouped,
    st.tuples(digits, digits).map(".".join), st.tuples(grouped, digits).map(".".join),
    st.tuples(st.sampled_from(["", "-", "+", "$", "£", "€", "¥", "#", "(", "~"]), digits | grouped,
              st.sampled_from(["", "th", "st", "s", "'s", "%", "k", "ing", "ed", ".", ",", ")"])).map("".join),
    st.sampled_from(["1e400", "1.5E-308", "9" * 309 + ".5", "10^400", "0x" + "f" * 64, "NaN", "inf", "-0", "00000"]),
)
word = st.text(alphabet=string.ascii_letters, min_size=1, max_size=12)
fragment = st.one_of(
    word, word, number,
    st.binary(min_size=8, max_size=64).map(bytes.hex),  # hashes
    st.text(alphabet=string.ascii_letters + string.digits + "+/", min_size=16, max_size=400).map(lambda s: s + "=="),
    st.builds(lambda w, n: f"https://example.com/{w}?id={n}#x", word, number),
    st.builds(lambda w, t: f"[{w}]({t})", word, number | word | st.just("/kˈOkəɹO/") | st.just("#ao#")),
    st.sampled_from(["`x = f(y)`", "```py\ndef f():\n    return {'a': [1, 2]}\n```", "**bold**", "# Title",
                     "| a | b |\n|---|---|", "- item", "1. first", "x**2 + y**2 = z**2", "a && b || !c", "=>", "::"]),
    st.text(alphabet=st.characters(categories=["So", "Sk", "Sm", "Sc"]), min_size=1, max_size=20),  # emoji, math
    st.text(alphabet=st.characters(categories=["Lo", "Lm", "Mn", "Mc", "Me"]), min_size=1, max_size=30),  # scripts
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zl", "Zp", "Zs", "Co"]), min_size=1, max_size=10),
    st.sampled_from(["\u0000", "\u200d", "\u200b", "\ufeff", "\u202e", "\u2066", "\u0301" * 50, "\ufffd"]),
    st.integers(100, 3_000).map(lambda n: "a" * n), st.integers(10, 300).map(lambda n: "supercalifragilistic" * n),
    st.sampled_from([".", "...", "!", "?", ",", ";", ":", "-", "—", "'", '"', "(", ")", "…"]),
    st.text(max_size=40),
)
llm_text = st.lists(fragment, min_size=1, max_size=8).flatmap(
    lambda parts: st.sampled_from([" ", "", "\n", ", ", ". "]).map(lambda sep: sep.join(parts)))


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer()


@fuzz_settings(EXAMPLES, deadline=10_000 if EXPLORE else None)
@given(text=llm_text, voice=st.sampled_from(["af_heart", "bf_emma"]))
@example(text="Call me at " + "9" * 400 + " tomorrow.", voice="af_heart")  # num2words: OverflowError
@example(text="x " + "9" * 5_000 + ".", voice="af_heart")  # int(): ValueError past 4300 digits
@example(text="Call " + "٩" * 400 + ".", voice="af_heart")  # another script's digits
@example(text="Call " + "⁹" * 400 + " or " + "９" * 400 + ".", voice="af_heart")  # NFKC folds them to 9
@example(text="🄊" * 400, voice="af_heart")  # NFKC "9," each: one grouped number
@example(text="It is " + ",".join(["999"] * 120) + " dollars.", voice="af_heart")
@example(text="It is " + "9" * 400 + ".5 units.", voice="af_heart")  # a float: inf
@example(text="$" + "9" * 400 + " and £" + ",".join(["999"] * 120) + ".99", voice="af_heart")
@example(text="the " + "9" * 400 + "th time, the " + "9" * 400 + "s.", voice="bf_emma")  # ordinal, plural
@example(text="It was -" + "9" * 400 + " degrees.", voice="af_heart")
@example(text="[a](" + "9" * 5_000 + ")", voice="af_heart")  # misaki reads a link target as a stress number
@example(text="👍" * 300 + " " + "e" + "\u0301" * 300, voice="af_heart")  # one word of 300 parts: 3 s
@example(text="a1" * 100, voice="bf_emma")  # 200 parts, each in the lexicon: 70 s
def test_any_text_an_llm_writes_becomes_phonemes_the_model_takes(phonemizer: Phonemizer, text: str, voice: str) -> None:
    chunks = phonemizer.phonemize(text, voice=voice)
    assert all(0 < len(chunk) <= MAX_PHONEMES for chunk in chunks)


@pytest.mark.parametrize(("text", "read"), [
    ("Call 5551234567 now.", "Call 5551234567 now."),  # up to MAX_NUMBER_DIGITS: untouched
    ("Call " + "9" * 20 + " now.", "Call " + " ".join("9" * 20) + " now."),
    ("Pi is 3.14159265358979323846.", "Pi is 3.1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4 6."),
    ("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20",
     "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20"),
    ("$1,000,000.50", "$1,000,000.50"),
])
def test_a_number_too_long_to_read_by_name_is_read_in_groups_or_digit_by_digit(text: str, read: str) -> None:
    assert read_long_numbers(text) == read
    assert MAX_NUMBER_DIGITS == 15  # the limit the table above is written for


def test_digits_read_one_by_one_are_the_words_of_the_text(phonemizer: Phonemizer) -> None:
    """Only spaces are added: each digit is a word of its own, found in the client's text."""
    (chunk,) = phonemizer.chunks("Call " + "7" * 20 + " now.", voice="af_heart",
                                 options=NORMALIZE_NONE)  # the guard alone (normalization reads it in groups)
    assert [w.text for w in chunk.words] == ["Call", *["7"] * 20, "now"]


STALLS = {  # 2 000 characters without a space; unguarded, misaki takes minutes to days on each
    "emoji": "👍" * 2_000, "combining marks": "e" + "\u0301" * 1_999, "letters and digits": "a1" * 1_000,
    "camel case": "aB" * 1_000, "base64": base64.b64encode(random.Random(7).randbytes(1_500)).decode(),
}


@pytest.mark.parametrize("text", STALLS.values(), ids=STALLS.keys())
def test_a_long_run_without_spaces_takes_seconds_not_hours(phonemizer: Phonemizer, text: str) -> None:
    started = time.monotonic()
    phonemizer.phonemize(text, voice="af_heart")
    assert time.monotonic() - started < 30  # about 1 s here (2 cores); the bound is for a loaded machine


def test_the_guards_only_add_spaces() -> None:
    text = "Call " + "9" * 40 + " or a1a1a1a1a1a1a1a1a1a1 👍👍👍👍👍👍👍👍👍👍 \ud800."
    assert readable(text).replace(" ", "") == text.replace(" ", "").replace("\ud800", "\ufffd")
