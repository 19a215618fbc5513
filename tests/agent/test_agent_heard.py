"""What the listener heard before barging in: utterances on one audio clock, cut at the last heard word."""

from __future__ import annotations

from voice_agent.heard import HeardWords, trim_history
from voicestream.protocol import WordTime as Word


def words_of(text: str, ms_per_char: int = 50) -> list[Word]:
    """Words of ``text`` with times proportional to their characters (a stand-in for the server's)."""
    out, at = [], 0
    for piece in text.split(" "):
        start = text.index(piece, at)
        out.append(Word(text=piece, start_ms=start * ms_per_char, end_ms=(start + len(piece)) * ms_per_char,
                        char_start=start, char_end=start + len(piece)))
        at = start + len(piece)
    return out


def spoken(*texts: str) -> HeardWords:
    heard = HeardWords()
    for n, text in enumerate(texts, start=1):
        heard.utterance(f"1.{n}", text)
        heard.words(f"1.{n}", words_of(text))
        heard.audio(f"1.{n}", len(text) * 50 / 2)  # audio arrives in two chunks per utterance
        heard.audio(f"1.{n}", len(text) * 50 / 2)
        heard.end(f"1.{n}")
    return heard


def test_nothing_heard_before_the_first_word_ends() -> None:
    assert spoken("Hello there.").heard_text(0) == ""
    assert spoken("Hello there.").heard_text(249) == ""


def test_the_playing_utterance_is_cut_at_its_last_heard_word() -> None:
    heard = spoken("Hello there, my friend.", "The weather is fine.")
    assert heard.heard_text(250) == "Hello"
    assert heard.heard_text(16 * 50) == "Hello there, my"
    assert heard.heard_text(23 * 50) == "Hello there, my friend."
    assert heard.heard_text(23 * 50 + 11 * 50) == "Hello there, my friend. The weather"
    assert heard.heard_text(10_000) == "Hello there, my friend. The weather is fine."


def test_an_utterance_without_audio_yet_was_not_heard() -> None:
    heard = spoken("First one.")
    heard.utterance("1.2", "Second one.")
    heard.words("1.2", words_of("Second one."))
    assert heard.heard_text(10_000) == "First one."
    assert heard.audio_ms == 10 * 50


def test_audio_that_never_came_was_not_heard() -> None:
    heard = HeardWords()
    heard.utterance("1.1", "Hello there, my friend.")
    heard.words("1.1", words_of("Hello there, my friend."))
    heard.audio("1.1", 400)  # the barge-in stopped the rest: the utterance never ended
    assert heard.heard_text(10_000) == "Hello"


def test_without_word_times_only_whole_utterances_count() -> None:
    heard = HeardWords()
    heard.utterance("a", "No timestamps here.")
    heard.audio("a", 1000)
    heard.end("a")
    heard.utterance("b", "Nor here.")
    heard.audio("b", 500)
    assert heard.heard_text(999) == "" and heard.heard_text(1200) == "No timestamps here."


def test_words_before_their_audio_are_placed_where_the_audio_so_far_ends() -> None:
    heard = spoken("First one.")
    heard.utterance("1.2", "Second one.")
    assert heard.offset_ms("1.2") == 500
    heard.audio("1.2", 100)
    heard.audio("1.3", 100)  # audio of an utterance the agent did not announce: only the clock moves
    assert heard.offset_ms("1.2") == 500 and heard.audio_ms == 700


def test_the_history_keeps_only_what_was_heard() -> None:
    cancelled = [{"role": "user", "content": [{"text": "hi"}]},
                 {"role": "assistant", "content": [{"text": "Cancelled by user"}]}]
    trim_history(cancelled, "Hello there, my")
    assert cancelled[-1] == {"role": "assistant", "content": [{"text": "Hello there, my …"}]}
    written = [{"role": "user", "content": [{"text": "hi"}]}, {"role": "assistant", "content": [{"text": "A. B."}]}]
    trim_history(written, "")
    assert written[-1]["content"] == [{"text": "…"}] and len(written) == 2
    unanswered = [{"role": "user", "content": [{"text": "hi"}]}]
    trim_history(unanswered, "Hel")
    assert unanswered[-1] == {"role": "assistant", "content": [{"text": "Hel …"}]}
