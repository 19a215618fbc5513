"""What the listener gets from the sentence chunker: the pieces sent to TTS, and when."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from voicestream.chunker import IncrementalSentenceChunker, aiter_sentences, iter_sentences
from voicestream.markdown import MAX_LINK_CHARS

EARLY: dict[str, object] = {"early_first_fragment": True}
RAW: dict[str, object] = {"strip_markdown": False}

# (id, input, expected pieces, options)
CASES: list[tuple[str, str, list[str], dict[str, object]]] = [
    # --- plain sentences
    ("three-sentences", "Hello there. How are you? I'm fine!", ["Hello there.", "How are you?", "I'm fine!"], {}),
    ("no-terminator", "just some words", ["just some words"], {}),
    ("terminator-at-end", "Done.", ["Done."], {}),
    ("empty", "", [], {}),
    ("only-whitespace", "  \n\t \n", [], {}),
    ("surrounding-whitespace", "   Hi there.   Bye.  ", ["Hi there.", "Bye."], {}),
    ("inner-blanks-collapsed", "So   much\tspace.", ["So much space."], {}),
    # --- titles and abbreviations
    ("title-dr", "Dr. Smith is here. He is kind.", ["Dr. Smith is here.", "He is kind."], {}),
    ("titles-mr-mrs-ms", "Mr. and Mrs. Brown met Ms. Lee. They talked.",
     ["Mr. and Mrs. Brown met Ms. Lee.", "They talked."], {}),
    ("titles-prof-st", "Prof. Li lives on St. James Street. Nice.",
     ["Prof. Li lives on St. James Street.", "Nice."], {}),
    ("eg-ie", "Pick one, e.g. Apples, i.e. The red ones. Fine.",
     ["Pick one, e.g. Apples, i.e. The red ones.", "Fine."], {}),
    ("vs", "It was Lakers vs. Celtics. Great game.", ["It was Lakers vs. Celtics.", "Great game."], {}),
    ("et-al-lowercase", "Smith et al. showed it. Good.", ["Smith et al. showed it.", "Good."], {}),
    ("et-al-ends", "It was shown by Smith et al. The data agree.",
     ["It was shown by Smith et al.", "The data agree."], {}),
    ("etc-then-opener", "Bring pens, paper, etc. We start at noon.",
     ["Bring pens, paper, etc.", "We start at noon."], {}),
    ("etc-then-name-glued", "We use Go, Rust, etc. Python is next.", ["We use Go, Rust, etc. Python is next."], {}),
    ("etc-end-of-stream", "Bring pens, paper, etc.", ["Bring pens, paper, etc."], {}),
    ("etc-then-paragraph", "Bring pens, etc.\n\nNext topic here.", ["Bring pens, etc.", "Next topic here."], {}),
    ("etc-in-parens", "Fruit (apples, pears, etc.) is healthy. Eat it.",
     ["Fruit (apples, pears, etc.) is healthy.", "Eat it."], {}),
    ("us-army", "The U.S. Army arrived. It rained.", ["The U.S. Army arrived.", "It rained."], {}),
    ("us-ends", "She moved to the U.S. Then she studied.", ["She moved to the U.S.", "Then she studied."], {}),
    ("uk-lowercase", "He is from the U.K. and loves tea.", ["He is from the U.K. and loves tea."], {}),
    ("am-then-opener", "Meet at 9 a.m. Then lunch at 1 p.m. sharp.",
     ["Meet at 9 a.m.", "Then lunch at 1 p.m. sharp."], {}),
    ("am-before-name", "The call is at 10 a.m. Eastern time. Be on time.",
     ["The call is at 10 a.m. Eastern time.", "Be on time."], {}),
    ("inc-ends", "He works at Acme Inc. The pay is good.", ["He works at Acme Inc.", "The pay is good."], {}),
    ("initials", "J. R. R. Tolkien wrote it. Read it.", ["J. R. R. Tolkien wrote it.", "Read it."], {}),
    ("middle-initial", "John F. Kennedy spoke. People listened.", ["John F. Kennedy spoke.", "People listened."], {}),
    ("no-before-number", "See No. 5 on the list. Thanks.", ["See No. 5 on the list.", "Thanks."], {}),
    ("no-as-word", "The answer is no. We stop.", ["The answer is no.", "We stop."], {}),
    ("month-before-number", "It ships Jan. 5 this year. Order now.", ["It ships Jan. 5 this year.", "Order now."], {}),
    ("opening-bracket-after-title", "Ask Dr. (Jane) Doe. Now.", ["Ask Dr. (Jane) Doe.", "Now."], {}),
    # --- numbers with points
    ("decimal", "Pi is 3.14 roughly. Yes.", ["Pi is 3.14 roughly.", "Yes."], {}),
    ("version", "Upgrade to v1.2.3 today. It is stable.", ["Upgrade to v1.2.3 today.", "It is stable."], {}),
    ("ip-address", "Connect to 192.168.0.1 now. Then log in.", ["Connect to 192.168.0.1 now.", "Then log in."], {}),
    ("price-ends-sentence", "It costs $3.50. That is cheap.", ["It costs $3.50.", "That is cheap."], {}),
    ("time-with-point", "The train leaves at 10.30 sharp. Be early.",
     ["The train leaves at 10.30 sharp.", "Be early."], {}),
    ("year-ends-sentence", "I was born in 1990. Then I grew up.", ["I was born in 1990.", "Then I grew up."], {}),
    ("thousands-comma", "We sold 1,000 units. Great.", ["We sold 1,000 units.", "Great."], {}),
    # --- lists
    ("ordinal-list", "1. Install the CLI.\n2. Run it.", ["1. Install the CLI.", "2. Run it."], {}),
    ("ordinal-list-no-terminators", "1. Install the CLI\n2. Run it", ["1. Install the CLI", "2. Run it"], {}),
    ("intro-then-list", "Here are the steps:\n1. Install.\n2. Run.",
     ["Here are the steps:", "1. Install.", "2. Run."], {}),
    ("dash-bullets", "- first item\n- second item", ["first item", "second item"], {}),
    ("star-bullets", "* first\n* second", ["first", "second"], {}),
    ("unicode-bullets", "• one\n• two", ["one", "two"], {}),
    ("bullets-markdown-off", "- first item\n- second item", ["- first item", "- second item"], RAW),
    ("nested-bullets", "- top\n  - nested item\n+ plus", ["top", "nested item", "plus"], {}),
    ("task-list", "- [ ] Buy milk\n- [x] Call mom", ["Buy milk", "Call mom"], {}),
    # --- ellipses and runs
    ("ellipsis-lowercase", "Wait... what? Okay.", ["Wait... what?", "Okay."], {}),
    ("ellipsis-uppercase", "I thought... No, never mind.", ["I thought...", "No, never mind."], {}),
    ("ellipsis-char", "Well… maybe. Sure.", ["Well… maybe.", "Sure."], {}),
    ("interrobang-runs", "Really?! You did that?!? Wow.", ["Really?!", "You did that?!?", "Wow."], {}),
    ("exclaim-then-said", '"Stop!" he said. Then he ran.', ['"Stop!" he said.', "Then he ran."], {}),
    # --- closing quotes and brackets
    ("closing-double-quote", 'He said "stop." Then he left.', ['He said "stop."', "Then he left."], {}),
    ("closing-paren", "It is fine (see above.) Next we go.", ["It is fine (see above.)", "Next we go."], {}),
    ("curly-quotes", "She said “yes.” We cheered.", ["She said “yes.”", "We cheered."], {}),
    ("single-quote", "He said 'no.' Then silence.", ["He said 'no.'", "Then silence."], {}),
    ("opening-quote-next", 'It ended. "Why?" she asked.', ["It ended.", '"Why?" she asked.'], {}),
    # --- URLs and e-mail
    ("url-with-dots", "Visit https://example.com/a.b?c=d. Then sign in.",
     ["Visit https://example.com/a.b?c=d.", "Then sign in."], {}),
    ("email", "Write to a.b@example.co.uk today. Thanks.", ["Write to a.b@example.co.uk today.", "Thanks."], {}),
    ("domain-ends", "Go to example.com. It works.", ["Go to example.com.", "It works."], {}),
    # --- paragraphs and newlines
    ("paragraphs-no-terminator", "First paragraph\n\nSecond paragraph", ["First paragraph", "Second paragraph"], {}),
    ("single-newline", "Line one\nLine two", ["Line one", "Line two"], {}),
    ("crlf", "One.\r\nTwo.", ["One.", "Two."], {}),
    ("abbreviation-before-newline", "Ask Dr.\nSmith knows.", ["Ask Dr.", "Smith knows."], {}),
    # --- markdown
    ("heading", "# Setup\nInstall it.", ["Setup", "Install it."], {}),
    ("heading-level-2", "## Results\n\nAll good.", ["Results", "All good."], {}),
    ("hash-not-heading", "#1 fan here.", ["#1 fan here."], {}),
    ("emphasis", "This is **very** *important* and __bold__ and _it_.",
     ["This is very important and bold and it."], {}),
    ("strikethrough-and-tilde", "The ~~old~~ new plan, ~5 minutes.", ["The old new plan, ~5 minutes."], {}),
    ("snake-case-kept", "Set max_chars to 300.", ["Set max_chars to 300."], {}),
    ("intraword-asterisk", "Compute 2*3 now.", ["Compute 2 3 now."], {}),
    ("inline-code", "Run `make test` now.", ["Run make test now."], {}),
    ("inline-code-literal", "Call `__init__` first.", ["Call __init__ first."], {}),
    ("link", "Read [the docs](https://example.com/docs.html). Then ask.", ["Read the docs.", "Then ask."], {}),
    ("link-with-parens-in-url", "See [Foo](https://w.org/Foo_(bar)) now.", ["See Foo now."], {}),
    ("image-dropped", "Look ![a cat](cat.png) here.", ["Look here."], {}),
    ("fenced-code-dropped", "Try this:\n```python\nprint('hi')\n```\nIt prints hi.",
     ["Try this:", "It prints hi."], {}),
    ("tilde-fence-dropped", "Code:\n~~~\nx = 1\n~~~\nDone.", ["Code:", "Done."], {}),
    ("unclosed-fence", "Code:\n```\nx = 1", ["Code:"], {}),
    ("blockquote", "> Quoted wisdom here.\n> More.", ["Quoted wisdom here.", "More."], {}),
    ("table", "| Name | Age |\n|------|-----|\n| Ann | 30 |", ["Name, Age", "Ann, 30"], {}),
    ("thematic-break", "Above.\n\n---\n\nBelow.", ["Above.", "Below."], {}),
    ("bold-sentence", "**Done.** Next step.", ["Done.", "Next step."], {}),
    ("bold-sentence-markdown-off", "**Done.** Next step.", ["**Done.**", "Next step."], RAW),
    ("markdown-off-keeps-symbols", "# Title with `code` and [a](b)", ["# Title with `code` and [a](b)"], RAW),
    ("stray-bracket", "Use [brackets sparingly. They confuse.", ["Use [brackets sparingly.", "They confuse."], {}),
    ("bracket-not-link", "See [1] for details. Done.", ["See [1] for details.", "Done."], {}),
    # --- CJK and other scripts
    ("chinese", "你好。我很好！谢谢？", ["你好。", "我很好！", "谢谢？"], {}),
    ("cjk-closing-bracket", "「好。」再见。", ["「好。」", "再见。"], {}),
    ("fullwidth-period", "これはペンです．あれは本です．", ["これはペンです．", "あれは本です．"], {}),
    ("devanagari-danda", "नमस्ते। आप कैसे हैं?", ["नमस्ते।", "आप कैसे हैं?"], {}),
    ("arabic-question", "كيف حالك؟ أنا بخير.", ["كيف حالك؟", "أنا بخير."], {}),
    ("ascii-period-before-cjk", "好的.我们走吧。", ["好的.", "我们走吧。"], {}),
    ("cjk-then-english", "I said 你好。Then left.", ["I said 你好。", "Then left."], {}),
    # --- Kokoro's languages (docs/languages.md): each one's sentence marks
    ("japanese", "こんにちは。元気ですか？はい、元気です！", ["こんにちは。", "元気ですか？", "はい、元気です！"], {}),
    ("japanese-ascii-marks", "元気ですか?はい!", ["元気ですか?", "はい!"], {}),
    ("mandarin", "今天天气很好！我们去公园吧？好的。", ["今天天气很好！", "我们去公园吧？", "好的。"], {}),
    ("mandarin-quote", "他说：“你好。”然后走了。", ["他说：“你好。”", "然后走了。"], {}),
    ("spanish-inverted", "¡Hola! ¿Cómo estás? Muy bien.", ["¡Hola!", "¿Cómo estás?", "Muy bien."], {}),
    ("spanish-inverted-after-period", "Vale. ¿Vamos? ¡Sí!", ["Vale.", "¿Vamos?", "¡Sí!"], {}),
    ("spanish-mark-then-comma", "¡Qué bien!, dijo ella. Luego se fue.",
     ["¡Qué bien!, dijo ella.", "Luego se fue."], {}),
    ("spanish-titles", "La Sra. García llegó. La Dra. Pérez también.",
     ["La Sra. García llegó.", "La Dra. Pérez también."], {}),
    ("spanish-thousands", "Cuesta 1.500 euros. Es caro.", ["Cuesta 1.500 euros.", "Es caro."], {}),
    ("french-spaced-marks", "Bonjour ! Comment ça va ? Très bien.", ["Bonjour !", "Comment ça va ?", "Très bien."], {}),
    ("french-narrow-spaces", "Vraiment\u202f? Oui\u202f! Bien.", ["Vraiment ?", "Oui !", "Bien."], {}),
    ("french-colon-semicolon", "Attention : le train part ; montez vite. Merci.",
     ["Attention : le train part ; montez vite.", "Merci."], {}),
    ("french-guillemets", "« Bonjour ! » dit-il. Puis il part.", ["« Bonjour ! » dit-il.", "Puis il part."], {}),
    ("french-guillemets-end", "Il a dit « oui ». Puis il part.", ["Il a dit « oui ».", "Puis il part."], {}),
    ("french-titles", "Mme Dupont et Mlle. Martin arrivent. Bienvenue.",
     ["Mme Dupont et Mlle. Martin arrivent.", "Bienvenue."], {}),
    ("hindi", "नमस्ते। आप कैसे हैं? मैं ठीक हूँ।", ["नमस्ते।", "आप कैसे हैं?", "मैं ठीक हूँ।"], {}),
    ("hindi-double-danda", "राम आए॥ सीता आईं।", ["राम आए॥", "सीता आईं।"], {}),
    ("italian", "Ciao! Come stai? Bene, grazie.", ["Ciao!", "Come stai?", "Bene, grazie."], {}),
    ("portuguese", "Olá! Tudo bem? Sim, obrigado.", ["Olá!", "Tudo bem?", "Sim, obrigado."], {}),
    # --- options
    ("early-first-clause", "Well, I think the answer is yes, but let me check. Then more, and more.",
     ["Well, I think the answer is yes,", "but let me check.", "Then more, and more."], EARLY),
    ("early-not-in-number", "We sold 1,000 units to 2,500 happy customers, all smiling.",
     ["We sold 1,000 units to 2,500 happy customers,", "all smiling."], {**EARLY, "min_first_fragment_words": 3}),
    ("early-too-short", "Sure, I can help. Next.", ["Sure, I can help.", "Next."], EARLY),
    ("early-colon", "Here is the plan for today: we start early.", ["Here is the plan for today:", "we start early."],
     {**EARLY, "min_first_fragment_words": 4}),
    ("early-off", "Well, I think the answer is yes, but let me check.",
     ["Well, I think the answer is yes, but let me check."], {}),
    ("max-chars-spaces", "one two three four five six seven eight nine ten",
     ["one two three four", "five six seven eight", "nine ten"], {"max_chars": 20}),
    ("max-chars-clause", "First part, second part; third part goes here",
     ["First part, second part;", "third part goes here"], {"max_chars": 30}),
    ("max-chars-long-word", "see https://example.com/a/very/long/path ok",
     ["see", "https://example.com/a/very/long/path", "ok"], {"max_chars": 10}),
    ("max-chars-cjk", "一二三四五六七八九十", ["一二三四", "五六七八", "九十"], {"max_chars": 4}),
]


def feed_all(fragments: list[str], **options: object) -> list[str]:
    chunker = IncrementalSentenceChunker(**options)  # type: ignore[arg-type]
    pieces: list[str] = []
    for fragment in fragments:
        pieces += chunker.feed(fragment)
    return pieces + chunker.flush()


@pytest.mark.parametrize(("text", "expected", "options"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pieces(text: str, expected: list[str], options: dict[str, object]) -> None:
    assert feed_all([text], **options) == expected
    assert feed_all(list(text), **options) == expected  # one character at a time


def test_table_is_large_and_ids_unique() -> None:
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)


# --- latency: the exact feed() call that releases a piece


def test_sentence_released_by_first_character_of_next_one() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("Hello there.") == []  # could still be "there.com"
    assert chunker.feed(" ") == []
    assert chunker.feed("How") == ["Hello there."]
    assert chunker.flush() == ["How"]


def test_newline_releases_immediately() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("- first item") == []
    assert chunker.feed("\n") == ["first item"]
    assert chunker.feed("Hi.\n\n") == ["Hi."]


def test_abbreviation_holds_until_the_real_end() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("Mr.") == []
    assert chunker.feed(" Smith") == []
    assert chunker.feed(" left.") == []
    assert chunker.feed(" Then") == ["Mr. Smith left."]


def test_ambiguous_abbreviation_waits_for_the_whole_next_word() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("Meet at 9 a.m. T") == []
    assert chunker.feed("hen") == []  # "Thence"? "Thenardier"?
    assert chunker.feed(" ") == ["Meet at 9 a.m."]


def test_cjk_terminator_waits_one_character_for_a_closing_bracket() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("你好。") == []
    assert chunker.feed("」") == []
    assert chunker.feed("我") == ["你好。」"]


def test_flush_releases_a_final_terminator_without_space() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("The end.") == []
    assert chunker.flush() == ["The end."]


def test_open_link_holds_speech_only_until_it_closes() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("Read [the docs](https://exa") == []
    assert chunker.feed("mple.com). Then") == ["Read the docs."]


def test_stray_bracket_gives_up_after_the_bound() -> None:
    chunker = IncrementalSentenceChunker(max_chars=1000)
    assert chunker.feed("Use [this. Then ") == []
    assert chunker.feed("x" * (MAX_LINK_CHARS - 20)) == []  # could still be a long link
    assert chunker.feed("x" * 20) == ["Use [this."]


def test_code_fence_does_not_hold_the_sentence_before_it() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("Intro line\n") == ["Intro line"]
    assert chunker.feed("```\nprint(1)\n") == []
    assert chunker.feed("```\nAfter.") == []
    assert chunker.flush() == ["After."]


# --- options and lifecycle


def test_early_first_fragment_released_on_the_space_after_the_comma() -> None:
    chunker = IncrementalSentenceChunker(early_first_fragment=True, min_first_fragment_words=3)
    assert chunker.feed("Let me look that up,") == []
    assert chunker.feed(" ") == ["Let me look that up,"]
    assert chunker.feed("then I will tell you, okay, in a moment. And then,") == [
        "then I will tell you, okay, in a moment."
    ]


def test_early_first_fragment_applies_again_after_flush_and_reset() -> None:
    chunker = IncrementalSentenceChunker(early_first_fragment=True, min_first_fragment_words=2)
    text = "Okay then, here we go. Next, again."
    first = chunker.feed(text) + chunker.flush()
    assert first == ["Okay then,", "here we go.", "Next, again."]
    assert chunker.feed(text) + chunker.flush() == first
    chunker.feed("Half a sen")
    chunker.reset()
    assert chunker.feed(text) + chunker.flush() == first


def test_reset_drops_buffered_text() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("This was interrupt") == []
    chunker.reset()
    assert chunker.feed("New one. Go") == ["New one."]
    assert chunker.flush() == ["Go"]


def test_reset_forgets_open_markdown() -> None:
    chunker = IncrementalSentenceChunker()
    chunker.feed("```\nsome code")
    chunker.reset()
    assert chunker.feed("Spoken again.") + chunker.flush() == ["Spoken again."]


def test_reusable_after_flush() -> None:
    chunker = IncrementalSentenceChunker()
    assert chunker.feed("First stream.") + chunker.flush() == ["First stream."]
    assert chunker.feed("Second stream. ") == []
    assert chunker.flush() == ["Second stream."]
    assert chunker.flush() == []


def test_max_chars_default_fits_kokoro_and_is_respected() -> None:
    text = " ".join(["word"] * 400) + "."
    pieces = feed_all([text])
    assert len(pieces) > 1 and all(len(p) <= 300 for p in pieces)
    assert " ".join(pieces) == text


@pytest.mark.parametrize("options", [{"max_chars": 0}, {"min_first_fragment_words": 0}])
def test_invalid_options_rejected(options: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        IncrementalSentenceChunker(**options)  # type: ignore[arg-type]


def test_no_markup_symbol_is_spoken() -> None:
    doc = (
        "# Title\n\n**Bold** and *it* and ~~gone~~, `code`.\n\n> quote\n\n- [link](http://x.y)\n"
        "* ![img](i.png) item\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```sh\nrm -rf *\n```\n___\n"
    )
    spoken = "".join(feed_all([doc]))
    assert not set(spoken) & set("#*~`>|[]()_"), spoken


# --- wrappers

TEXT = "Hello there. **Dr. Smith** is in.\n- one\n- two\nBye, now."
EXPECTED = ["Hello there.", "Dr. Smith is in.", "one", "two", "Bye, now."]


def gen() -> Iterator[str]:
    yield from (TEXT[i : i + 3] for i in range(0, len(TEXT), 3))


async def agen() -> AsyncIterator[str]:
    for fragment in gen():
        await asyncio.sleep(0)
        yield fragment


async def collect(source: object, **options: object) -> list[str]:
    return [piece async for piece in aiter_sentences(source, **options)]  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["str", "list", "generator"])
def test_iter_sentences(kind: str) -> None:
    source = {"str": TEXT, "list": list(gen()), "generator": gen()}[kind]
    assert list(iter_sentences(source)) == EXPECTED


@pytest.mark.parametrize("kind", ["str", "list", "generator", "async-generator"])
def test_aiter_sentences(kind: str) -> None:
    source = {"str": TEXT, "list": list(gen()), "generator": gen(), "async-generator": agen()}[kind]
    assert asyncio.run(collect(source)) == EXPECTED


def test_wrappers_pass_options() -> None:
    expected = ["Hello there.", "**Dr. Smith** is in.", "- one", "- two", "Bye, now."]
    assert list(iter_sentences(gen(), strip_markdown=False)) == expected
    assert asyncio.run(collect(agen(), strip_markdown=False)) == expected
    early = {"early_first_fragment": True, "min_first_fragment_words": 2}
    text = "Hello there, my good friend. Bye."
    assert list(iter_sentences(text, **early)) == ["Hello there,", "my good friend.", "Bye."]
    assert asyncio.run(collect(text, **early)) == ["Hello there,", "my good friend.", "Bye."]


def test_a_huge_unbroken_run_is_cut_and_stays_fast() -> None:
    blob = "A" * 250_000
    chunker = IncrementalSentenceChunker()
    pieces: list[str] = []
    for i in range(0, len(blob), 4):
        pieces += chunker.feed(blob[i : i + 4])
    pieces += chunker.flush()
    assert "".join(pieces) == blob
    assert max(len(p) for p in pieces) == 1000
