"""Text normalization, rule by rule: what an LLM writes -> what G2P is given, offsets kept.

One table row per kind of span (the by-ear test, test_normalize_by_ear.py, checks that what these
strings say is what a listener hears). Pure text: no model, no G2P, milliseconds.
"""

from __future__ import annotations

import random
import string
import time

import pytest

from kokoro_server.normalize import RULES, normalize
from voicestream.protocol import ProtocolError
from voicestream.protocol.normalization import (
    NORMALIZE_ALL,
    NORMALIZE_GROUPS,
    NORMALIZE_NONE,
    Normalization,
    check_normalization,
)

CASES = {  # group: (written, what G2P reads)
    "markdown": [
        ("Your total is **$5**.", "Your total is five dollars."),
        ("This is *very* _important_ and ~~old~~.", "This is very important and old."),
        ("# Setup\n- Install it\n> Note this", "Setup\nInstall it\nNote this"),
        ("See [the docs](https://example.com/a_b) now.", "See the docs now."),
        ("Look: ![a chart](chart.png) here.", "Look:  here."),
        ("Run `make test` first.", "Run make test first."),
        ("Before.\n```python\nprint(1)\n```\nAfter.", "Before.\n\nAfter."),
        ("| Tea | Coffee |\n|---|---|", "Tea, Coffee\n"),
        ("**See [the guide](https://x.io)**", "See the guide"),
    ],
    "urls": [
        ("Open https://docs.aws.amazon.com/x now.", "Open docs dot A.W.S. dot amazon dot com slash x now."),
        ("Visit www.example.com.", "Visit WWW dot example dot com."),
        ("Go to github.com/org/repo today.", "Go to github dot com slash org slash repo today."),
        ("Read README.md first.", "Read readme dot MD first."),
        ("Edit config_loader.py", "Edit config loader dot PY"),
    ],
    "emails": [("Write to jane.doe@example.com today.", "Write to jane dot doe at example dot com today.")],
    "money": [
        ("It costs $1,299.99.", "It costs one thousand two hundred ninety nine dollars and ninety nine cents."),
        ("Your total is £42.50.", "Your total is forty two pounds and fifty pence."),
        ("Only €9.99 or 5€.", "Only nine euros and ninety nine cents or five euros."),
        ("Revenue hit $2.5M.", "Revenue hit two point five million dollars."),
        ("A $0.99 app", "A ninety nine cents app"),
        ("It is 100 USD.", "It is one hundred dollars."),
        ("That is ¥500.", "That is five hundred yen."),
    ],
    "phones": [
        ("Call (555) 123-4567.", "Call five five five, one two three, four five six seven."),
        ("Dial +44 20 7946 0958.", "Dial plus four four, two zero, seven nine four six, zero nine five eight."),
    ],
    "times": [
        ("Meet me at 09:15.", "Meet me at nine fifteen."),
        ("It starts at 9:05 pm.", "It starts at nine oh five PM."),
        ("Doors open at 7:00.", "Doors open at seven o'clock."),
        ("Lunch at 12pm.", "Lunch at twelve PM."),
        ("Landing at 14:00.", "Landing at fourteen hundred."),
    ],
    "dates": [
        ("Due 2024-03-15.", "Due March fifteenth, twenty twenty four."),
        ("On 03/15/2024.", "On March fifteenth, twenty twenty four."),
        ("On 15/03/2024.", "On the fifteenth of March twenty twenty four."),
        ("By March 3rd, 2025.", "By March third, twenty twenty five."),
        ("On 4 July 1999.", "On the fourth of July nineteen ninety nine."),
        ("From 2019-2023.", "From twenty nineteen to twenty twenty three."),
    ],
    "units": [
        ("It is 5km away.", "It is five kilometers away."),
        ("It weighs 2.5 kg.", "It weighs two point five kilograms."),
        ("It was 72°F or 22°C.", "It was seventy two degrees Fahrenheit or twenty two degrees Celsius."),
        ("Use 1 GB of 16GB.", "Use one gigabyte of sixteen gigabytes."),
        ("Drive at 60 mph.", "Drive at sixty miles per hour."),
        ("Put 5 in the box.", "Put 5 in the box."),
    ],
    "numbers": [
        ("Sales grew 45%.", "Sales grew forty five percent."),
        ("She came 1st and 22nd.", "She came first and twenty second."),
        ("Pi is 3.14.", "Pi is three point one four."),
        ("Upgrade to v2.4.1.", "Upgrade to version two point four point one."),
        ("Add 3/4 cup and ½ spoon.", "Add three quarters cup and one half spoon."),
        ("Open 24/7.", "Open twenty four seven."),
        ("It has 1,000,000 rows.", "It has one million rows."),
        ("It was -5 today.", "It was minus five today."),
        ("Ping 192.168.0.1 now.", "Ping one hundred ninety two dot one hundred sixty eight dot zero dot one now."),
        ("Card 12345678901234567.",
         "Card one two three, four five six, seven eight nine, zero one two, three four five, six seven."),
    ],
    "abbreviations": [
        ("Dr. Smith lives on Main St. near St. Louis.", "Doctor Smith lives on Main Street near Saint Louis."),
        ("Fruit, e.g. apples vs. pears, etc.", "Fruit, for example apples versus pears, et cetera."),
    ],
    "symbols": [
        ("R&D and Q&A", "R and D and Q and A"),
        ("2 + 2 = 4", "2 plus 2 equals 4"),
        ("Ticket #42 for #launch", "Ticket number forty two for hashtag launch"),
        ("Learn C++ today", "Learn C plus plus today"),
        ("Ask @sam", "Ask at sam"),
    ],
    "emoji": [("Great job! 🎉🚀", "Great job! "), ("✅ Done", " Done")],
}
ROWS = [(group, written, read) for group, rows in CASES.items() for written, read in rows]


@pytest.mark.parametrize(("group", "written", "read"), ROWS, ids=[f"{g}:{w[:30]}" for g, w, _ in ROWS])
def test_each_kind_of_span_reads_as_a_person_would(group: str, written: str, read: str) -> None:
    assert normalize(written).text == read


@pytest.mark.parametrize(("group", "written", "read"), ROWS, ids=[f"{g}:{w[:30]}" for g, w, _ in ROWS])
def test_switching_a_group_off_leaves_its_spans_as_written(group: str, written: str, read: str) -> None:
    only_this_off = Normalization(off=frozenset({group}))
    result = normalize(written, only_this_off).text
    if group == "markdown":
        assert any(c in result for c in "*_#`[>|~") or "print" in result
    elif read != written:
        assert result != read


def test_normalize_off_is_the_text_as_written() -> None:
    text = "Pay **$5** at 09:15 🎉"
    assert normalize(text, NORMALIZE_NONE).text == text


def test_every_rule_belongs_to_a_group_a_client_can_switch() -> None:
    assert {rule.group for rule in RULES} <= set(NORMALIZE_GROUPS)
    assert set(NORMALIZE_GROUPS) <= {rule.group for rule in RULES}


def test_each_character_points_at_the_span_it_stands_for() -> None:
    text = "Pay **$1,299.99** now"
    result = normalize(text)
    words = result.text.split()
    assert words[0] == "Pay" and words[-1] == "now"
    at = result.text.index("one")
    start, end = result.origin(at, result.text.index("cents") + len("cents"))
    assert text[start:end] == "$1,299.99"  # every word of the amount: those nine characters
    kept = result.text.index("now")
    assert result.origin(kept, kept + 3) == (text.index("now"), text.index("now") + 3)


def test_kept_markdown_words_keep_their_own_offsets() -> None:
    text = "See [the docs](https://x.io/a) and **this**."
    result = normalize(text)
    for word in ("the", "docs", "this"):
        at = result.text.index(word)
        start, end = result.origin(at, at + len(word))
        assert text[start:end] == word


def test_the_option_reads_from_json_and_names_the_field_it_refuses() -> None:
    assert check_normalization(True) == NORMALIZE_ALL
    assert check_normalization(False) == NORMALIZE_NONE
    assert check_normalization({"urls": False, "emoji": True}).off == frozenset({"urls"})
    assert check_normalization({"urls": False}).to_json() == {"urls": False}
    with pytest.raises(ProtocolError) as bad_group:
        check_normalization({"colours": False})
    assert bad_group.value.field == "normalize.colours"
    with pytest.raises(ProtocolError) as bad_value:
        check_normalization({"urls": "no"})
    assert bad_value.value.field == "normalize.urls"
    with pytest.raises(ProtocolError):
        check_normalization("yes")


HOSTILE = {
    "asterisks": "*" * 5_000, "emphasis": "**a " * 2_500, "backticks": "`a" * 5_000, "brackets": "[a](" * 2_500,
    "digits": "9" * 10_000, "dotted": "1." * 5_000, "money": "$1," * 3_000, "underscores": "_a " * 3_000,
    "random": "".join(random.Random(3).choice(string.printable + "£€°½🎉") for _ in range(10_000)),
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_any_text_normalizes_quickly_with_offsets_for_every_character(text: str) -> None:
    started = time.monotonic()
    result = normalize(text)
    assert time.monotonic() - started < 5.0  # 10 000 characters (the protocol's limit): well under it here
    assert len(result.spans) == len(result.text)
    assert all(0 <= s <= e <= len(text) for s, e in result.spans)
