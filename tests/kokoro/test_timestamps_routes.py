"""Word timestamps on the wire: the WebSocket's ``words`` events and POST's SSE ``event: words``.

Against the real server (tiny model: the times are Kokoro's own durations of random weights, so
only their order and bounds are checked here; test_words.py checks them against real speech).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
import pytest
from kokoro_harness import Server
from wsclient import collect, connect, of_type, send, sse_events

pytestmark = pytest.mark.kokoro

SPEAK = "Hello there, my friend. How are you today?"
MARKDOWN = "**Bold** words, and a [link](https://example.com). Then _more_ text!"
MARKDOWN_SPOKEN = ["Bold", "words", "and", "a", "link", "Then", "more", "text"]


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def words_of(text: str) -> list[str]:
    return re.findall(r"[A-Za-z']+", text)


async def speak_with(
    server: Server, text: str, *, timestamps: bool | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    async with connect(server.ws) as ws:
        configure = {"type": "configure"} if timestamps is None else {"type": "configure", "timestamps": timestamps}
        await send(ws, configure)
        (configured,) = await collect(ws, of_type("configured"))
        await send(ws, {"type": "speak", "id": "s1", "text": text})
        events = await collect(ws, of_type("utterance_end", id="s1"))
        await send(ws, {"type": "close"})
        return configured, events


def assert_in_order_and_inside(
    words: list[dict[str, Any]], text: str, audio_ms: float, spoken: list[str] | None = None
) -> None:
    assert [w["text"] for w in words] == (spoken or words_of(text))  # every word, once, in order
    for word in words:
        assert text[word["char_start"]:word["char_end"]] == word["text"]
        assert 0 <= word["start_ms"] <= word["end_ms"] <= audio_ms + 1
    for a, b in zip(words, words[1:]):
        assert a["end_ms"] <= b["start_ms"] and a["char_end"] <= b["char_start"]


def test_configure_timestamps_sends_words_before_each_sentences_audio(server: Server) -> None:
    configured, events = run(speak_with(server, SPEAK, timestamps=True))
    assert configured["timestamps"] is True
    kinds = [e["type"] for e in events]
    assert kinds[0] == "utterance_start" and kinds[-1] == "utterance_end"
    # two sentences: two model jobs, each announced by its words before its audio
    assert kinds.count("words") == 2
    first_words, first_audio = kinds.index("words"), kinds.index("audio")
    assert first_words < first_audio
    second_words = kinds.index("words", first_words + 1)
    assert "audio" in kinds[first_words:second_words] and kinds[second_words + 1] == "audio"
    words = [w for e in events if e["type"] == "words" for w in e["words"]]
    assert all(e["id"] == "s1" for e in events if e["type"] == "words")
    assert_in_order_and_inside(words, SPEAK, events[-1]["audio_ms"])
    # the second sentence's words are timed after the first sentence's audio
    audio_before_second = sum(e["bytes"] for e in events[:second_words] if e["type"] == "audio")
    assert events[second_words]["words"][0]["start_ms"] >= audio_before_second / 48 - 1  # pcm: 48 bytes/ms


@pytest.mark.parametrize("timestamps", [None, False])
def test_without_timestamps_no_words_are_sent(server: Server, timestamps: bool | None) -> None:
    configured, events = run(speak_with(server, SPEAK, timestamps=timestamps))
    assert configured["timestamps"] is False
    assert "words" not in [e["type"] for e in events] and any(e["type"] == "audio" for e in events)


def test_a_bad_timestamps_value_names_the_field(server: Server) -> None:
    async def scenario() -> dict[str, Any]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "configure", "timestamps": "yes"})
            (error,) = await collect(ws, of_type("error"))
            return error
    error = run(scenario())
    assert error["field"] == "timestamps" and error["message"].startswith("timestamps:")



def test_sse_words_point_into_the_text_as_sent(server: Server) -> None:
    body = {"text": MARKDOWN, "transport": "sse", "timestamps": True}
    events = sse_events(httpx.post(f"{server.http}/invocations", json=body, timeout=120).text)
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "end" and names.index("words") < names.index("audio")
    words = [w for name, data in events if name == "words" for w in data["words"]]
    # markup and the link's URL are not spoken; the offsets still point into the text as sent
    assert_in_order_and_inside(words, MARKDOWN, events[-1][1]["audio_ms"], MARKDOWN_SPOKEN)
    assert MARKDOWN[words[0]["char_start"]:words[0]["char_end"]] == "Bold" and words[0]["char_start"] == 2
    plain = sse_events(httpx.post(f"{server.http}/invocations", json={**body, "timestamps": False}, timeout=120).text)
    assert "words" not in [name for name, _ in plain]
