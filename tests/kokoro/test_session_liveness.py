"""Every request a client sends is answered: barge-in at the very start of an answer, cancel by id.

Written from docs/protocol.md with a bare websockets client, against the real server (tiny model).
The stateful property test over random interleavings is test_session_state_machine.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from kokoro_harness import Server
from wsclient import collect, connect, of_type, receive, send

pytestmark = pytest.mark.kokoro

ANSWER_S = 30  # a request unanswered this long is never answered: the tiny model speaks in ms


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:  # one event loop per test keeps tests independent
    return asyncio.run(coro)


@pytest.mark.parametrize("opening", ["speak", "delta"])
def test_a_cancel_on_utterance_start_leaves_the_session_speaking(server: Server, opening: str) -> None:
    """A barge-in as the answer begins: cancel sent the moment ``utterance_start`` arrives, before
    any audio. The next speak, and the turn after it, are still answered (five rounds, so the
    race between the cancel and the first window is lost and won both ways)."""

    async def scenario() -> list[list[dict[str, Any]]]:
        after_each: list[list[dict[str, Any]]] = []
        async with connect(server.ws) as ws:
            for round_ in range(5):
                if opening == "speak":
                    await send(ws, {"type": "speak", "text": "Sure, here is what I found about that."})
                else:
                    await send(ws, {"type": "delta", "text": "Sure, here is what I found. And"})
                await collect(ws, of_type("utterance_start"), timeout=ANSWER_S)
                await send(ws, {"type": "cancel"})
                await collect(ws, of_type("cancelled"), timeout=ANSWER_S)
                await send(ws, {"type": "speak", "id": f"okay-{round_}", "text": "Okay."})
                await send(ws, {"type": "flush"})
                after_each.append(await collect(ws, of_type("turn_end"), timeout=ANSWER_S))
        return after_each

    for round_, events in enumerate(run(scenario())):
        control = [(e["type"], e.get("id")) for e in events if e["type"] != "audio"]
        assert control == [("utterance_start", f"okay-{round_}"), ("utterance_end", f"okay-{round_}"),
                           ("turn_end", None)]


def test_cancel_before_g2p_has_run_is_answered_and_the_next_turn_spoken(server: Server) -> None:
    """Cancel sent right behind the speak, without waiting for anything."""

    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "gone", "text": "This answer is cut off at once."})
            await send(ws, {"type": "cancel"})
            events = await collect(ws, of_type("cancelled"), timeout=ANSWER_S)
            await send(ws, {"type": "speak", "id": "next", "text": "Still here."})
            await send(ws, {"type": "flush"})
            return events[-1], await collect(ws, of_type("turn_end"), timeout=ANSWER_S)

    cancelled, after = run(scenario())
    assert cancelled["ids"] == ["gone"]
    assert [e.get("id") for e in after if e["type"] == "utterance_end"] == ["next"]


def test_ping_is_answered_while_an_utterance_plays(server: Server) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "text": "Keep talking for a little while, please."})
            await send(ws, {"type": "ping"})
            return await collect(ws, of_type("pong"), timeout=ANSWER_S)

    assert run(scenario())[-1] == {"type": "pong"}


def test_cancel_by_id_drops_only_the_named_utterances_and_the_turn_goes_on(server: Server) -> None:
    long_text = " ".join(f"Sentence {n} of the first answer keeps the model busy." for n in range(6))

    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "a", "text": long_text})
            await send(ws, {"type": "speak", "id": "b", "text": "This one is taken back."})
            await send(ws, {"type": "speak", "id": "c", "text": "This one is still said."})
            await collect(ws, of_type("utterance_start", id="a"), timeout=ANSWER_S)
            await send(ws, {"type": "cancel", "ids": ["b", "never-sent"]})
            await send(ws, {"type": "flush"})
            return await collect(ws, of_type("turn_end"), timeout=ANSWER_S)

    events = run(scenario())
    control = [(e["type"], e.get("id")) for e in events if e["type"] not in ("audio", "cancelled")]
    assert control == [("utterance_end", "a"), ("utterance_start", "c"), ("utterance_end", "c"), ("turn_end", None)]
    cancelled = [e for e in events if e["type"] == "cancelled"]
    assert cancelled == [{"type": "cancelled", "turn": 1, "ids": ["b"]}]  # an unknown id is not listed
    assert events[-1]["utterances"] == 2


def test_cancel_by_id_of_the_utterance_playing_stops_its_audio(server: Server) -> None:
    long_text = " ".join(f"Sentence {n} of a long answer that is cut short." for n in range(10))

    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "long", "text": long_text})
            await send(ws, {"type": "speak", "id": "next", "text": "Then this."})
            await collect(ws, lambda e: e["type"] == "audio", timeout=ANSWER_S)
            await send(ws, {"type": "cancel", "ids": ["long"]})
            await send(ws, {"type": "flush"})
            return await collect(ws, of_type("turn_end"), timeout=ANSWER_S)

    events = run(scenario())
    at = next(i for i, e in enumerate(events) if e["type"] == "cancelled")
    assert events[at]["ids"] == ["long"]
    after = events[at + 1:]
    assert after[0] == {"type": "utterance_start", "id": "next", "turn": 1, "text": "Then this."}
    assert [(e["type"], e.get("id")) for e in after if e["type"] != "audio"][1:] == [
        ("utterance_end", "next"), ("turn_end", None)]
    assert not any(e["type"] == "utterance_end" and e["id"] == "long" for e in events)


@pytest.mark.parametrize("ids", [[], "a", [""], ["x" * 129]])
def test_cancel_with_bad_ids_is_refused_naming_the_field(server: Server, ids: object) -> None:
    async def scenario() -> dict[str, Any]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "cancel", "ids": ids})
            return await receive(ws, timeout=ANSWER_S)

    error = run(scenario())
    assert error["type"] == "error" and error["code"] == "invalid_field" and error["field"] == "ids"
