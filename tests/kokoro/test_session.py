"""WS /invocations-bidirectional-stream against the real server, following docs/protocol.md."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from kokoro_harness import Server
from websockets.exceptions import ConnectionClosed
from wsclient import audio_bytes, collect, connect, of_type, receive, send

pytestmark = pytest.mark.kokoro


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:  # one event loop per test keeps tests independent
    return asyncio.run(coro)


def test_three_turns_pipelined_follow_the_protocol(server: Server) -> None:
    async def scenario() -> list[list[dict[str, Any]]]:
        turns = []
        async with connect(server.ws) as ws:
            await send(ws, {"type": "configure", "voice": "am_michael"})
            configured = await receive(ws)
            assert configured["type"] == "configured" and configured["voice"] == "am_michael"
            assert set(configured["voices"]) == {"af_heart", "am_michael"}
            for turn in range(3):
                # Both sentences go out before any audio is read: the server must pipeline them.
                await send(ws, {"type": "speak", "id": f"t{turn}-a", "text": "Hello there."})
                await send(ws, {"type": "speak", "id": f"t{turn}-b", "text": "How are you today?"})
                await send(ws, {"type": "flush"})
                turns.append(await collect(ws, of_type("turn_end")))
        return turns

    for number, events in enumerate(run(scenario()), start=1):
        control = [e for e in events if e["type"] != "audio"]
        assert [(e["type"], e.get("id")) for e in control] == [
            ("utterance_start", f"t{number - 1}-a"), ("utterance_end", f"t{number - 1}-a"),
            ("utterance_start", f"t{number - 1}-b"), ("utterance_end", f"t{number - 1}-b"),
            ("turn_end", None),
        ]
        assert all(e["turn"] == number for e in control)
        ends = [e for e in control if e["type"] == "utterance_end"]
        # every byte announced by utterance_end arrived between its start and end
        first_end = events.index(ends[0])
        assert sum(e["bytes"] for e in events[:first_end] if e["type"] == "audio") == ends[0]["bytes"]
        assert len(audio_bytes(events)) == sum(e["bytes"] for e in ends)
        assert all(e["audio_ms"] > 0 and e["synthesis_ms"] > 0 for e in ends)
        assert control[-1]["utterances"] == 2
        assert control[-1]["audio_ms"] == sum(e["audio_ms"] for e in ends)
        assert len(audio_bytes(events)) % 2 == 0  # whole s16 samples


def test_deltas_are_cut_into_sentences_by_the_server(server: Server) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            for piece in ["Dr. Smith ", "paid $3", ".50 today", ". Then he", " left"]:
                await send(ws, {"type": "delta", "text": piece})
            await send(ws, {"type": "flush"})
            return await collect(ws, of_type("turn_end"))

    starts = [e for e in run(scenario()) if e["type"] == "utterance_start"]
    assert [e["text"] for e in starts] == ["Dr. Smith paid $3.50 today.", "Then he left"]
    assert [e["id"] for e in starts] == ["1.1", "1.2"]


def test_cancel_stops_audio_and_the_session_stays_usable(server: Server) -> None:
    long_text = " ".join(f"This is sentence number {n} of a long answer." for n in range(12))

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "long", "text": long_text})
            await send(ws, {"type": "speak", "id": "next", "text": "Never spoken."})
            await collect(ws, lambda e: e["type"] == "audio")  # audio is flowing
            await send(ws, {"type": "cancel"})
            until_cancelled = await collect(ws, of_type("cancelled"))
            await send(ws, {"type": "speak", "id": "after", "text": "Back again."})
            await send(ws, {"type": "flush"})
            after = await collect(ws, of_type("turn_end"))
            return until_cancelled, after

    until_cancelled, after = run(scenario())
    cancelled = until_cancelled[-1]
    assert cancelled["ids"] == ["long", "next"] and cancelled["turn"] == 1
    assert not any(e["type"] in ("utterance_end",) for e in until_cancelled)
    # after `cancelled`, only the new utterance's frames arrive, in a new turn
    assert [e.get("id") for e in after if e["type"] != "audio"] == ["after", "after", None]
    assert after[0] == {"type": "utterance_start", "id": "after", "turn": 2, "text": "Back again."}
    assert server.wait_idle()["queued"] == 0


def test_disconnect_mid_utterance_frees_the_model(server: Server) -> None:
    long_text = " ".join(f"Sentence {n} keeps the model busy for a while." for n in range(20))

    async def scenario() -> None:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "text": long_text})
            await collect(ws, lambda e: e["type"] == "audio")
        # the socket is closed here, mid-utterance

    run(scenario())
    status = server.wait_idle()
    assert (status["sessions"], status["queued"], status["running"]) == (0, 0, 0)


def test_a_long_paragraph_does_not_hold_back_another_sessions_first_sentence(server: Server) -> None:
    paragraph = " ".join(f"Paragraph sentence {n} goes on and on." for n in range(10))

    async def scenario() -> list[tuple[str, dict[str, Any]]]:
        log: list[tuple[str, dict[str, Any]]] = []

        async def client(name: str, text: str, started: asyncio.Event | None) -> None:
            async with connect(server.ws) as ws:
                await send(ws, {"type": "speak", "id": name, "text": text})
                if started is not None:
                    first = await receive(ws)
                    log.append((name, first))
                    started.set()
                while True:
                    event = await receive(ws)
                    if event["type"] != "audio":
                        log.append((name, event))
                    if event["type"] == "utterance_end":
                        return

        started = asyncio.Event()
        long_task = asyncio.create_task(client("long", paragraph, started))
        await started.wait()
        await client("short", "Quick question.", None)
        await long_task
        return log

    log = run(scenario())
    ends = [name for name, event in log if event["type"] == "utterance_end"]
    # the short session is served between the long one's sentences, not after all ten
    assert ends == ["short", "long"]


BAD_MESSAGES = [
    ("not json", "invalid_json", None),
    ("[1, 2]", "invalid_json", None),
    (json.dumps({"type": "dance"}), "unknown_type", "type"),
    (json.dumps({"type": "speak"}), "invalid_field", "text"),
    (json.dumps({"type": "speak", "text": "   "}), "invalid_field", "text"),
    (json.dumps({"type": "speak", "text": "x" * 10_001}), "text_too_long", "text"),
    (json.dumps({"type": "speak", "text": "Hi.", "voice": "nobody"}), "unknown_voice", "voice"),
    (json.dumps({"type": "speak", "text": "Hi.", "speed": 5}), "invalid_field", "speed"),
    (json.dumps({"type": "speak", "text": "Hi.", "speed": "fast"}), "invalid_field", "speed"),
    (json.dumps({"type": "speak", "text": 42}), "invalid_field", "text"),
    (json.dumps({"type": "configure", "format": "ogg"}), "invalid_field", "format"),
    (json.dumps({"type": "configure", "sample_rate": 12345}), "invalid_field", "sample_rate"),
    (json.dumps({"type": "configure", "format": "opus", "sample_rate": 22050}), "invalid_field", "sample_rate"),
    (json.dumps({"type": "speak", "text": "Hi.", "colour": "red"}), "invalid_field", "colour"),
    (json.dumps({"type": "delta", "text": None}), "invalid_field", "text"),
]


@pytest.mark.parametrize(("frame", "code", "field"), BAD_MESSAGES, ids=[c for _, c, _ in BAD_MESSAGES])
def test_bad_messages_get_an_error_naming_the_field_and_the_session_survives(
    server: Server, frame: str | bytes, code: str, field: str | None
) -> None:
    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with connect(server.ws) as ws:
            await ws.send(frame)
            error = await receive(ws)
            await send(ws, {"type": "speak", "text": "Still here."})
            await send(ws, {"type": "flush"})
            return error, await collect(ws, of_type("turn_end"))

    error, rest = run(scenario())
    assert error["type"] == "error" and error["code"] == code
    assert error.get("field") == field
    assert field is None or error["message"].startswith(f"{field}:")
    assert rest[-1]["utterances"] == 1


def test_oversized_and_non_utf8_frames_are_refused_without_closing(server: Server) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await ws.send(b"\xff\xfe{")
            await ws.send(json.dumps({"type": "speak", "text": "a " * 40_000}).encode())
            await send(ws, {"type": "ping"})
            return [await receive(ws) for _ in range(3)]

    bad_utf8, oversized, pong = run(scenario())
    assert bad_utf8["code"] == "invalid_json" and "UTF-8" in bad_utf8["message"]
    assert oversized["code"] == "frame_too_large"
    assert pong == {"type": "pong"}


def test_binary_frames_carrying_json_work_like_text_frames(server: Server) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "bin", "text": "Sent as bytes."}, binary=True)
            await send(ws, {"type": "flush"}, binary=True)
            return await collect(ws, of_type("turn_end"))

    events = run(scenario())
    assert events[0]["id"] == "bin" and len(audio_bytes(events)) > 0


def test_the_aws_sample_message_shape_works_unchanged(server: Server) -> None:
    async def scenario() -> tuple[list[dict[str, Any]], object]:
        async with connect(server.ws) as ws:
            await ws.send(json.dumps({"text": "Hello from the sample.", "voice": "af_heart", "speed": 1.0,
                                      "request_id": "req-1"}))
            events = await collect(ws, of_type("synthesis_complete"))
            await ws.send(json.dumps({"type": "close"}))
            try:
                await asyncio.wait_for(ws.recv(), 10)
            except Exception as exc:  # the server closes the socket
                return events, exc
            return events, None

    events, closed = run(scenario())
    assert events[0] == {"type": "synthesis_start", "request_id": "req-1"}
    assert events[-1]["type"] == "synthesis_complete" and events[-1]["request_id"] == "req-1"
    assert events[-1]["bytes"] == len(audio_bytes(events)) > 0
    assert isinstance(closed, ConnectionClosed) and closed.rcvd is not None and closed.rcvd.code == 1000


@pytest.mark.parametrize("fmt", ["wav", "mp3", "opus", "aac", "flac"])
def test_each_utterance_is_a_decodable_stream_in_the_session_format(server: Server, fmt: str) -> None:
    import io

    import av

    async def scenario() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "configure", "format": fmt})
            await receive(ws)
            await send(ws, {"type": "speak", "id": "u", "text": "Encoded speech."})
            return await collect(ws, of_type("utterance_end"))

    events = run(scenario())
    with av.open(io.BytesIO(audio_bytes(events)), mode="r") as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
        rate = container.streams.audio[0].rate
    assert samples / rate == pytest.approx(events[-1]["audio_ms"] / 1000, abs=0.15)


def test_websocket_pings_are_answered_and_connecting_does_not_wait_for_the_model(server: Server) -> None:
    paragraph = " ".join(f"Busy sentence {n} keeps the model working." for n in range(8))

    async def scenario() -> list[str]:
        order: list[str] = []
        async with connect(server.ws) as busy:
            await send(busy, {"type": "speak", "id": "busy", "text": paragraph})
            await collect(busy, lambda e: e["type"] == "audio")
            async with connect(server.ws) as fresh:  # handshake while the model is busy
                order.append("connected")
                pong_waiter = await fresh.ping()
                await asyncio.wait_for(pong_waiter, 10)
                order.append("pong")
            await collect(busy, of_type("utterance_end"), log=None)
            order.append("busy-finished")
        return order

    assert run(scenario()) == ["connected", "pong", "busy-finished"]
