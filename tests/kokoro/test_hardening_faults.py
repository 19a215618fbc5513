"""Faults against the real server: clients that vanish, half-close, stop reading or go quiet, a
full server, and a model directory that is not there. Every case ends with the server idle and
still serving, and the limits' close codes are the documented ones (docs/protocol.md#limits)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from kokoro_harness import Server, start_server
from waiting import wait_until
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed
from wsclient import collect, connect, of_type, receive, send

pytestmark = pytest.mark.kokoro

SEND_TIMEOUT_S = 1.0
IDLE_TIMEOUT_S = 3.0
MAX_SESSIONS = 4
LONG_TEXT = " ".join(f"Sentence {n} keeps the model busy for a while." for n in range(12))


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def settle(server: Server, predicate: Callable[[dict[str, Any]], bool], *, timeout: float = 15.0) -> dict[str, Any]:
    """Poll /diagnostics until ``predicate(status)``; return the last status (bounded)."""
    return wait_until(server.diagnostics, until=predicate, timeout=timeout)


def idle(status: dict[str, Any]) -> bool:
    return (status["sessions"], status["queued"], status["running"]) == (0, 0, 0)


@pytest.fixture(scope="module")
def strict(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with short timeouts and a small session limit, so the limits show in seconds."""
    running = start_server(tiny_model, tmp_path_factory.mktemp("strict") / "server.log", env={
        "KOKORO_SEND_TIMEOUT_S": str(SEND_TIMEOUT_S), "KOKORO_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S),
        "KOKORO_MAX_SESSIONS": str(MAX_SESSIONS), "KOKORO_WARMUP": "0",
    })
    yield running
    running.stop()


def small_window_socket(port: int) -> socket.socket:
    """A client socket whose receive buffer is tiny (no autotuning): a reader that stops reading
    fills it, and the server's send buffer, within a few frames."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


def test_ping_reports_limits_and_diagnostics_the_rest(server: Server) -> None:
    assert server.ping() == {"status": "ok", "engine": "torch", "device": "cpu", "sessions": 0, "max_sessions": 64,
                             "busy": False, "queued": 0, "running": 0}
    status = server.diagnostics()
    assert status["busy"] is False and status["max_sessions"] == 64
    assert status["decoder_pace"] == 0.15  # conftest.SHARED_PACE
    assert status["decoder_overhead_s"] == 0.0  # a pinned pace is never fitted
    assert isinstance(status["tasks"], int) and status["tasks"] >= 1


def test_a_hundred_clients_vanishing_mid_utterance_leave_the_server_idle_and_serving(server: Server) -> None:
    before_tasks, before_fds = server.wait_idle()["tasks"], server.idle_fds()

    async def vanish(wait_for_audio: bool) -> None:
        ws = await ws_connect(server.ws, max_size=None, open_timeout=10)
        await send(ws, {"type": "speak", "text": LONG_TEXT})
        # the utterance has started (its model jobs are queued or running); every tenth client
        # waits until its audio is flowing
        await collect(ws, lambda e: e["type"] == ("audio" if wait_for_audio else "utterance_start"), timeout=60)
        ws.transport.abort()  # gone: no close frame, a TCP reset

    async def scenario() -> None:
        for n in range(100):
            await vanish(n % 10 == 0)

    run(scenario())
    status = settle(server, idle)
    assert idle(status), status
    # the tasks and descriptors of 100 sessions are all gone
    status = settle(server, lambda s: s["tasks"] <= before_tasks)
    assert status["tasks"] <= before_tasks, (status, before_tasks)
    fds_after = server.fds_down_to(before_fds)
    assert fds_after <= before_fds, (fds_after, before_fds)

    async def served() -> list[dict[str, Any]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "speak", "id": "after", "text": "Still here."})
            return await collect(ws, of_type("utterance_end"))

    events = run(served())
    assert events[-1]["id"] == "after" and events[-1]["bytes"] > 0


def test_half_closed_sockets_end_their_sessions(server: Server) -> None:
    async def tcp_half_close() -> None:  # the client shuts its write side mid-utterance, no close frame
        ws = await ws_connect(server.ws, max_size=None, open_timeout=10)
        await send(ws, {"type": "speak", "text": LONG_TEXT})
        await receive(ws)
        ws.transport.write_eof()
        await asyncio.sleep(0.5)
        ws.transport.abort()

    async def close_frame_then_keep_reading() -> int | None:  # a close frame, and the reader stays
        ws = await ws_connect(server.ws, max_size=None, open_timeout=10)
        await send(ws, {"type": "speak", "text": LONG_TEXT})
        await receive(ws)
        await asyncio.wait_for(ws.close(code=1000), 10)
        return ws.close_code

    run(tcp_half_close())
    assert idle(settle(server, idle))
    assert run(close_frame_then_keep_reading()) == 1000
    assert idle(settle(server, idle))


def held_until_dropped(server: Server, *, timeout: float = 60.0) -> int:
    """Poll /diagnostics until the stalled session is gone; return the most bytes it was seen to hold."""
    deadline, most = time.monotonic() + timeout, 0
    status = server.diagnostics()
    while status["sessions"] and time.monotonic() < deadline:
        most = max(most, status["held_bytes_max"])
        time.sleep(0.02)
        status = server.diagnostics()
    return most


def test_a_client_that_stops_reading_is_dropped_with_4002_holding_at_most_the_documented_bytes(strict: Server) -> None:
    """README's bound, measured: what the server holds for a reader that stopped (its queue of
    frames, the frame being written, the transport's write buffer) never passes HELD_BYTES_MAX,
    and it does fill up to past the transport's high-water mark (the client really stalled)."""
    from kokoro_server.outbox import HELD_BYTES_MAX, TRANSPORT_HIGH_WATER

    async def scenario() -> tuple[int, int | None, int]:
        sock = small_window_socket(strict.port)
        ws = await ws_connect(strict.ws, sock=sock, max_size=None, max_queue=1, open_timeout=10)
        await send(ws, {"type": "configure", "format": "pcm", "sample_rate": 48000})
        await send(ws, {"type": "speak", "text": LONG_TEXT})
        # Read nothing until the server gives up on us (its session ends), then read it all.
        loop = asyncio.get_running_loop()
        most = await loop.run_in_executor(None, lambda: held_until_dropped(strict))
        assert strict.ping()["sessions"] == 0
        received = 0
        try:
            while True:
                frame = await asyncio.wait_for(ws.recv(), 10)
                received += len(frame)
        except ConnectionClosed:
            pass
        return received, ws.close_code, most

    received, code, most = run(scenario())
    assert received > 0
    assert code == 4002
    assert TRANSPORT_HIGH_WATER < most <= HELD_BYTES_MAX, (most, HELD_BYTES_MAX)
    assert idle(settle(strict, idle))


def test_a_client_that_never_reads_again_is_aborted_and_holds_nothing(strict: Server) -> None:
    settle(strict, idle)
    before = strict.idle_fds()

    async def scenario() -> None:
        sock = small_window_socket(strict.port)
        ws = await ws_connect(strict.ws, sock=sock, max_size=None, max_queue=1, open_timeout=10)
        await send(ws, {"type": "configure", "format": "pcm", "sample_rate": 48000})
        await send(ws, {"type": "speak", "text": LONG_TEXT})
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, lambda: settle(strict, lambda s: s["sessions"] == 0, timeout=60))
        # the send timeout, then the close's grace: the server aborts the connection
        after = await loop.run_in_executor(None, lambda: strict.fds_down_to(before, timeout_s=4 * SEND_TIMEOUT_S + 10))
        assert after <= before, (after, before)
        ws.transport.abort()

    run(scenario())
    assert idle(settle(strict, idle))
    assert "aborted the connection of a client that read nothing" in strict.log.read_text()


def test_an_idle_session_is_closed_with_4001_after_an_error_frame(strict: Server) -> None:
    async def scenario() -> tuple[list[dict[str, Any]], int | None, float]:
        started = time.monotonic()
        async with connect(strict.ws) as ws:
            await send(ws, {"type": "ping"})
            events = []
            try:
                while True:
                    events.append(await receive(ws, timeout=IDLE_TIMEOUT_S + 10))
            except ConnectionClosed:
                pass
            return events, ws.close_code, time.monotonic() - started

    events, code, elapsed = run(scenario())
    assert [e["type"] for e in events] == ["pong", "error"] and events[1]["code"] == "idle_timeout"
    assert code == 4001
    assert IDLE_TIMEOUT_S <= elapsed < IDLE_TIMEOUT_S + 8


def test_a_speaking_session_is_not_idle(strict: Server) -> None:
    """The idle clock runs only while nothing is being spoken: a long utterance outlives it."""
    text = " ".join(f"Sentence {n} goes on." for n in range(40))

    async def scenario() -> dict[str, Any]:
        async with connect(strict.ws) as ws:
            await send(ws, {"type": "speak", "id": "long", "text": text})
            events = await collect(ws, lambda e: e["type"] in ("utterance_end", "error"), timeout=120)
            return events[-1]

    assert run(scenario())["type"] == "utterance_end"


def test_past_the_session_limit_a_client_gets_busy_and_1013_and_ping_says_busy(strict: Server) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int | None]:
        held = [await ws_connect(strict.ws, open_timeout=10) for _ in range(MAX_SESSIONS)]
        for ws in held:  # each is a live session
            await send(ws, {"type": "ping"})
            assert (await receive(ws))["type"] == "pong"
        loop = asyncio.get_running_loop()
        status = await loop.run_in_executor(None, strict.ping)
        extra = await ws_connect(strict.ws, open_timeout=10)
        refused = await receive(extra)
        with pytest.raises(ConnectionClosed):
            await receive(extra)
        for ws in held:
            await ws.close()
        return status, refused, extra.close_code

    status, refused, code = run(scenario())
    assert status["busy"] is True and status["sessions"] == MAX_SESSIONS
    assert refused["type"] == "error" and refused["code"] == "busy" and code == 1013
    assert settle(strict, idle)["busy"] is False


def test_a_huge_post_body_is_refused_without_reading_it_all(server: Server) -> None:
    def endless() -> Iterator[bytes]:
        yield b'{"text": "'
        for _ in range(10_000):  # 640 MB if the server read it all
            yield b"a" * 65536

    response = httpx.post(f"{server.http}/invocations", content=endless(), timeout=30,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"
    # a body that only claims to be huge is refused on its Content-Length, before it is read
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 999999999\r\n\r\n{")
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 413"), head[:200]


def test_a_model_directory_that_is_missing_at_start_exits_non_zero_naming_it(tmp_path: Path) -> None:
    gone = tmp_path / "vanished-model"
    result = subprocess.run([sys.executable, "-m", "kokoro_server", "serve", "--model-dir", str(gone)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert str(gone) in result.stderr and "cannot start" in result.stderr


def test_a_model_directory_emptied_before_start_exits_non_zero_naming_it(tiny_model: Path, tmp_path: Path) -> None:
    emptied = tmp_path / "emptied"
    emptied.mkdir()
    (emptied / "config.json").write_text((tiny_model / "config.json").read_text())  # the rest is gone
    result = subprocess.run([sys.executable, "-m", "kokoro_server", "serve", "--model-dir", str(emptied)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert str(emptied) in result.stderr


@pytest.mark.parametrize(("name", "value"), [
    ("KOKORO_SEND_TIMEOUT_S", "0"), ("KOKORO_SEND_TIMEOUT_S", "nan"), ("KOKORO_IDLE_TIMEOUT_S", "soon"),
    ("KOKORO_MAX_TURN_CHARS", "0"),
])
def test_bad_limit_settings_stop_the_server_naming_the_variable(tiny_model: Path, name: str, value: str) -> None:
    from kokoro_server.config import ConfigError, Settings

    with pytest.raises(ConfigError, match=name):
        Settings.from_env({"KOKORO_MODEL_DIR": str(tiny_model), name: value})


def test_limit_settings_are_read_from_the_environment(tiny_model: Path) -> None:
    from kokoro_server.config import Settings

    settings = Settings.from_env({"KOKORO_MODEL_DIR": str(tiny_model), "KOKORO_MAX_TURN_CHARS": "500",
                                  "KOKORO_IDLE_TIMEOUT_S": "12.5", "KOKORO_SEND_TIMEOUT_S": "2"})
    assert (settings.max_turn_chars, settings.idle_timeout_s, settings.send_timeout_s) == (500, 12.5, 2.0)
    defaults = Settings.from_env({"KOKORO_MODEL_DIR": str(tiny_model)})
    assert (defaults.max_sessions, defaults.max_text_chars, defaults.max_turn_chars, defaults.max_queued_utterances,
            defaults.idle_timeout_s, defaults.send_timeout_s) == (64, 10_000, 100_000, 64, 300.0, 30.0)


def test_turn_limit_on_a_live_server(strict: Server) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect(strict.ws) as ws:
            await send(ws, {"type": "configure"})
            configured = await receive(ws)
            await send(ws, {"type": "delta", "text": "x" * 9_000})
            for _ in range(11):
                await send(ws, {"type": "delta", "text": "y" * 9_000})
            # (the chunker may cut the unpunctuated text into utterances first: queue_full may come too)
            error = await collect(ws, lambda e: e.get("code") == "text_too_long")
            await send(ws, {"type": "cancel"})
            await collect(ws, of_type("cancelled"))
            return configured, error[-1]

    configured, error = run(scenario())
    assert configured["limits"]["max_turn_chars"] == 100_000
    assert error["code"] == "text_too_long" and "turn" in error["message"]
    assert idle(settle(strict, idle))



def test_readme_and_protocol_doc_state_the_held_bytes_bound_the_server_enforces() -> None:
    from kokoro_server.outbox import HELD_BYTES_MAX

    stated = f"{HELD_BYTES_MAX:,}".replace(",", " ")
    repo = Path(__file__).resolve().parents[2]
    for doc in ("README.md", "docs/protocol.md"):
        text = " ".join((repo / doc).read_text().split())
        assert f"{stated} bytes" in text, f"{doc} does not state {stated} bytes"
