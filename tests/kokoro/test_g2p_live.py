"""Text that broke or stalled G2P, through the real server (tiny model, real misaki): one row per
failure class test_g2p_hostile.py found (its variants are there, in-process). Each is spoken now
(the guards in g2p.py), over the WebSocket and over POST, and the session or the next POST goes
on. G2P's warnings reach the server log as one line per utterance, not one per word.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from kokoro_harness import Server
from waiting import wait_until
from wsclient import collect, connect, of_type, send, sse_events

pytestmark = pytest.mark.kokoro

CLASSES = {  # before the guards: what G2P raised, or how long it held the G2P thread (shared by all)
    "number past num2words": "Call me at " + "9" * 310 + " tomorrow.",  # OverflowError: read digit by digit
    "run without spaces": "Wow " + "a1" * 60 + " okay.",  # 5 s (cubic in its parts; 2 000 of them: days)
}
SPEED = 2.0  # the tiny model speaks 310 digits for minutes: half of it is enough


def post(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.http}/invocations", content=json.dumps({**body, "speed": SPEED}), timeout=300,
                      headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("text", CLASSES.values(), ids=CLASSES.keys())
def test_the_websocket_speaks_it_and_the_next_utterance(server: Server, text: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "hostile", "text": text, "speed": SPEED})
            await send(ws, {"type": "speak", "id": "after", "text": "Okay."})
            await send(ws, {"type": "flush"})
            return await collect(ws, of_type("turn_end"), timeout=300)

    events = [e for e in asyncio.run(scenario()) if e["type"] != "audio"]
    assert [(e["type"], e.get("id")) for e in events] == [
        ("utterance_start", "hostile"), ("utterance_end", "hostile"),
        ("utterance_start", "after"), ("utterance_end", "after"), ("turn_end", None),
    ]
    assert events[1]["audio_ms"] > 0 and events[3]["audio_ms"] > 0


@pytest.mark.parametrize("transport", ["binary", "sse"])
@pytest.mark.parametrize("text", CLASSES.values(), ids=CLASSES.keys())
def test_post_speaks_it_and_serves_the_next(server: Server, text: str, transport: str) -> None:
    response = post(server, {"text": text, "transport": transport})
    assert response.status_code == 200 and len(response.content) > 0
    if transport == "sse":
        names = [name for name, _ in sse_events(response.text)]
        assert names[0] == "start" and names[-1] == "end" and "audio" in names
    after = post(server, {"text": "Okay."})
    assert after.status_code == 200 and len(after.content) > 0


def test_g2p_warnings_are_one_log_line_per_utterance(server: Server) -> None:
    """espeak's ``phonemizer`` warned once per word misaki did not know (and thrice per word of
    another script): this text made 6 warning lines per utterance."""
    text = "I love Kubernetes, PostgreSQL and ChatGPT. See https://example.com/a/b?c=1. Hi 你好 мир 👍 ∑∫."
    start = server.log.stat().st_size

    async def speak() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "noisy", "text": text})
            await send(ws, {"type": "flush"})
            return await collect(ws, of_type("turn_end"))

    assert [e["type"] for e in asyncio.run(speak()) if e["type"] == "utterance_end"] == ["utterance_end"]
    assert post(server, {"text": text}).status_code == 200  # three sentences: one request, one line

    def new_lines() -> list[str]:
        with server.log.open("rb") as log:
            log.seek(start)
            return log.read().decode(errors="replace").splitlines()

    lines = wait_until(new_lines, until=lambda lines: sum("g2p: " in line for line in lines) >= 2, timeout=30)
    assert sum("g2p: " in line for line in lines) == 2, lines  # one for the WebSocket, one for the POST
    assert not [line for line in lines if " phonemizer: " in line], lines
