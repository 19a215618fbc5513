"""Word timestamps of normalized text point back at the text the client sent, through the real
server's ``words`` events (tiny model: only the character ranges matter here) and POST's SSE."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from kokoro_harness import Server
from test_timestamps_routes import speak_with
from wsclient import collect, connect, of_type, send, sse_events

pytestmark = pytest.mark.kokoro

TEXT = "Your total is **$1,299.99** at 09:15 🎉 today."
AMOUNT = "$1,299.99"


def spans(words: list[dict[str, Any]], text: str) -> list[tuple[str, str]]:
    return [(w["text"], text[w["char_start"]:w["char_end"]]) for w in words]


def words_in(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [w for e in events if e.get("type") == "words" for w in e["words"]]


def test_the_words_of_a_normalized_span_all_point_at_the_characters_sent(server: Server) -> None:
    _, events = asyncio.run(speak_with(server, TEXT, timestamps=True))
    pairs = spans(words_in(events), TEXT)
    amount = [spoken for spoken, sent in pairs if sent == AMOUNT]
    assert amount == ["one", "thousand", "two", "hundred", "ninety", "nine", "dollars", "and", "ninety", "nine",
                      "cents"], pairs
    assert ("nine", "09:15") in pairs and ("fifteen", "09:15") in pairs
    assert pairs[:3] == [("Your", "Your"), ("total", "total"), ("is", "is")] and pairs[-1] == ("today", "today")
    starts = [w["char_start"] for w in words_in(events)]
    assert starts == sorted(starts)


async def _configured_off(server: Server, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    async with connect(server.ws) as ws:
        await send(ws, {"type": "configure", "timestamps": True, "normalize": False})
        (configured,) = await collect(ws, of_type("configured"))
        await send(ws, {"type": "speak", "id": "s1", "text": text})
        events = await collect(ws, of_type("utterance_end", id="s1"))
        await send(ws, {"type": "close"})
        return configured, events


def test_a_session_can_turn_normalization_off(server: Server) -> None:
    configured, events = asyncio.run(_configured_off(server, "Meet at 09:15 today."))
    assert configured["normalize"] is False
    assert "fifteen" not in [w["text"] for w in words_in(events)]  # misaki's own reading of "09:15"


def test_post_sse_words_point_at_the_amount(server: Server) -> None:
    response = httpx.post(f"{server.http}/invocations", timeout=60, json={
        "text": f"It costs {AMOUNT} now.", "transport": "sse", "timestamps": True})
    words = [w for event, data in sse_events(response.text) if event == "words" for w in data["words"]]
    text = f"It costs {AMOUNT} now."
    assert [spoken for spoken, sent in spans(words, text) if sent == AMOUNT][:2] == ["one", "thousand"]


def test_a_bad_normalize_option_is_refused_naming_the_field(server: Server) -> None:
    response = httpx.post(f"{server.http}/invocations", timeout=60, json={"text": "Hi.", "normalize": {"url": False}})
    assert response.status_code == 400 and response.json()["error"]["field"] == "normalize.url"
    openai = httpx.post(f"{server.http}/v1/audio/speech", timeout=60, json={
        "model": "kokoro", "input": "Hi.", "voice": "af_heart", "normalize": "no"})
    assert openai.status_code == 400 and openai.json()["error"]["param"] == "normalize"
