"""Failures: a TTS that is not there or drops mid-turn, and clients that leave mid-turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from agent_harness import ANSWER, PIECES, RunningAgent, free_port, serve_agent, tts_idle
from agent_wire import TurnLog, sse_events, ws_open, ws_read_until_audio, ws_turn
from waiting import wait_until
from websockets.asyncio.server import ServerConnection, serve


@contextlib.contextmanager
def dropping_tts(*, chunks: int = 2) -> Iterator[str]:
    """A fake TTS server that starts the first utterance, sends ``chunks`` audio frames, then cuts
    the TCP connection without a close frame."""
    loop = asyncio.new_event_loop()
    port = free_port()
    started = threading.Event()
    stop: asyncio.Future[None] | None = None

    async def handler(connection: ServerConnection) -> None:
        async for message in connection:
            payload = json.loads(message)
            if payload.get("type") == "speak":
                await connection.send(json.dumps({"type": "utterance_start", "id": payload["id"], "turn": 1,
                                                  "text": payload["text"]}))
                for _ in range(chunks):
                    await connection.send(b"\x00\x01" * 4800)
                connection.transport.abort()
                return

    async def main() -> None:
        nonlocal stop
        stop = loop.create_future()
        async with serve(handler, "127.0.0.1", port):
            started.set()
            await stop

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:

        def finish() -> None:
            if stop is not None and not stop.done():
                stop.set_result(None)

        loop.call_soon_threadsafe(finish)
        thread.join(10)
        loop.close()


def check_text_survives(log: TurnLog) -> dict[str, object]:
    """The answer's text is complete and the TTS failure is one error event; returns it."""
    assert log.types[0] == "start" and log.types[-1] == "end"
    assert log.text == ANSWER and log.of("text_end")[0]["text"] == ANSWER
    assert log.sentences == PIECES
    errors = log.of("error")
    assert [e["code"] for e in errors] == ["tts_failed"], errors
    assert log.end["tts_ok"] is False and log.end["interrupted"] is False
    return errors[0]


def test_tts_down_text_keeps_streaming_over_sse() -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with serve_agent(tts_url=closed) as agent:
        with httpx.Client(timeout=30, trust_env=False) as client:
            with client.stream("POST", f"{agent.url}/invocations", json={"prompt": "Hello?"}) as response:
                log = TurnLog(items=list(sse_events(response)))
        error = check_text_survives(log)
        assert "cannot connect" in str(error["message"])
        assert log.audio == []
        assert wait_until(agent.idle), agent.running()


def test_tts_drops_mid_turn_text_keeps_streaming_over_ws() -> None:
    with dropping_tts(chunks=2) as url, serve_agent(tts_url=url, token_ms=(20, 30)) as agent:
        ws, _ = ws_open(agent.ws_url)
        with ws:
            log = ws_turn(ws, {"prompt": "Hello?"})
            check_text_survives(log)
            # The two chunks sent before the drop arrived; the error came after them.
            assert len(log.audio) == 2
            assert log.first_audio_index() < log.index("error")
            # The session survives: the next turn reports the failure again and still writes.
            check_text_survives(ws_turn(ws, {"prompt": "Again?"}))
        assert wait_until(agent.idle), agent.running()


def test_ws_client_leaving_mid_turn_leaves_nothing_running(agent: RunningAgent, tts_url: str) -> None:
    ws, _ = ws_open(agent.ws_url)
    with ws:
        ws.send(json.dumps({"prompt": "Talk to me."}))
        ws_read_until_audio(ws)
        assert agent.running()["turns"] == 1 and agent.running()["tts_sessions"] == 1
    # Gone mid-turn: the agent's turn, its TTS session and the server's jobs all end.
    assert wait_until(agent.idle), agent.running()
    assert wait_until(lambda: tts_idle(tts_url)), httpx.get(f"{tts_url}/ping").json()
    assert httpx.get(f"{agent.url}/ping").json()["status"] == "Healthy"


def test_sse_client_leaving_mid_turn_leaves_nothing_running(agent: RunningAgent, tts_url: str) -> None:
    with httpx.Client(timeout=30, trust_env=False) as client:
        with client.stream("POST", f"{agent.url}/invocations", json={"prompt": "Talk to me."}) as response:
            for event in sse_events(response):
                if isinstance(event, dict) and event["type"] == "audio":
                    break
            assert agent.running()["turns"] == 1
            assert httpx.get(f"{agent.url}/ping").json()["status"] == "HealthyBusy"
    assert wait_until(agent.idle), agent.running()
    assert wait_until(lambda: tts_idle(tts_url)), httpx.get(f"{tts_url}/ping").json()


@pytest.mark.parametrize("voice", ["no_such_voice"])
def test_unknown_voice_is_a_tts_error_and_text_survives(agent: RunningAgent, voice: str) -> None:
    ws, _ = ws_open(agent.ws_url)
    with ws:
        log = ws_turn(ws, {"prompt": "Hi.", "voice": voice})
        error = check_text_survives(log)
        assert voice in str(error["message"])
        ok = ws_turn(ws, {"prompt": "Hi again.", "voice": "am_michael"})
        assert ok.of("error") == [] and len(ok.audio) > 0 and ok.of("start")[0]["voice"] == "am_michael"
