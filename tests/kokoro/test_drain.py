"""SIGTERM drains (docs/protocol.md#close-codes): SageMaker stops a container with SIGTERM on every
update and scale-in. The utterance a caller is hearing finishes, nothing new starts, /ping says
``draining``, then the session closes with 1001 and the process exits on its own."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from kokoro_harness import Server, start_server
from waiting import wait_until_async

pytestmark = pytest.mark.kokoro

LONG = " ".join(f"Sentence {n} of the answer that is playing when the server is told to stop." for n in range(3))


@pytest.fixture()
def stopping_server(tiny_model: Path, tmp_path: Path) -> Iterator[Server]:
    # the longest drain allowed: a loaded test machine is slow, and the point is that the drain waits
    server = start_server(tiny_model, tmp_path / "server.log", env={"KOKORO_WARMUP": "0", "KOKORO_DRAIN_S": "25"})
    yield server
    server.stop()


def test_sigterm_finishes_the_utterance_in_flight_then_closes_with_1001(stopping_server: Server) -> None:
    server = stopping_server

    async def scenario() -> tuple[list[dict[str, Any]], int, str, dict[str, Any]]:
        events: list[dict[str, Any]] = []
        async with websockets.connect(server.ws, max_size=None) as ws:
            await ws.send(json.dumps({"type": "speak", "id": "playing", "text": LONG}))
            await ws.send(json.dumps({"type": "speak", "id": "queued", "text": "Not started before the stop."}))
            await ws.send(json.dumps({"type": "flush"}))
            while not isinstance(frame := await asyncio.wait_for(ws.recv(), 60), bytes):
                events.append(json.loads(frame))
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)
            ping = await _draining_ping(server)
            try:
                while True:
                    frame = await asyncio.wait_for(ws.recv(), 60)
                    events.append({"type": "audio"} if isinstance(frame, bytes) else json.loads(frame))
            except websockets.ConnectionClosed as closed:
                assert closed.rcvd is not None
                return events, closed.rcvd.code, closed.rcvd.reason, ping
        raise AssertionError("unreachable")

    events, code, reason, ping = asyncio.run(scenario())
    control = [(e["type"], e.get("id"), e.get("code")) for e in events if e["type"] != "audio"]
    assert control == [("utterance_start", "playing", None), ("utterance_end", "playing", None),
                       ("error", None, "going_away")]
    assert (code, reason) == (1001, "server stopping: reconnect and send again what was not spoken")
    assert ping == {"status": "draining", "sessions": 1}
    assert server.process is not None
    assert server.process.wait(timeout=30) == 0


async def _draining_ping(server: Server) -> dict[str, Any]:
    """/ping answers 503 ``draining`` once the SIGTERM is handled (polled, bounded)."""
    async with httpx.AsyncClient(timeout=5) as http:
        answer = await wait_until_async(lambda: http.get(f"{server.http}/ping"),
                                        until=lambda answer: answer.status_code == 503, timeout=10, interval=0.02)
    assert answer.status_code == 503, "/ping never said draining"
    body: dict[str, Any] = answer.json()
    return body


def test_while_draining_new_sessions_and_requests_are_refused(stopping_server: Server) -> None:
    server = stopping_server

    async def scenario() -> tuple[dict[str, Any], int, httpx.Response]:
        async with websockets.connect(server.ws, max_size=None) as holding:  # keeps the drain going
            await holding.send(json.dumps({"type": "speak", "text": LONG}))
            await asyncio.wait_for(holding.recv(), 60)
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)
            await _draining_ping(server)
            async with websockets.connect(server.ws) as late:
                refusal = json.loads(await asyncio.wait_for(late.recv(), 10))
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await asyncio.wait_for(late.recv(), 10)
            async with httpx.AsyncClient(timeout=10) as http:
                post = await http.post(f"{server.http}/invocations", json={"text": "Hello."})
            assert closed.value.rcvd is not None
            return refusal, closed.value.rcvd.code, post

    refusal, code, post = asyncio.run(scenario())
    assert refusal["type"] == "error" and refusal["code"] == "busy" and refusal["message"] == "server stopping"
    assert code == 1013
    assert post.status_code == 503 and post.json()["error"]["code"] == "draining"
