"""The agent under hostile input and a TTS that comes and goes.

- Property tests (hypothesis): 1 500 generated frames through ``decode_message`` +
  ``parse_request`` in-process, then 300 hostile frames over one live ``/ws`` connection, each
  answered by exactly one ``error`` event while the connection stays open; the agent ends idle.
- The TTS down for one turn, then back: the next turn on the same connection reconnects and
  speaks. The TTS dropped mid-turn (its connection cut after audio started): the text keeps
  streaming with one ``tts_failed`` event, and the next turn speaks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from agent_harness import ANSWER, RunningAgent, fd_count, free_port, serve_agent, tts_idle
from agent_wire import TurnLog, ws_open, ws_read_turn, ws_read_until_audio, ws_turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_until

from voice_agent.messages import MAX_MESSAGE_BYTES, PromptRequest, decode_message, parse_request
from voicestream.protocol import ProtocolError

IN_PROCESS_CASES = 1_500
LIVE_CASES = 300
ERROR_CODES = {"invalid_json", "invalid_field", "unknown_type", "missing_field", "empty_prompt", "prompt_too_long",
               "unknown_mode", "message_too_large", "not_running"}

json_leaf = (st.none() | st.booleans() | st.integers() | st.sampled_from([10**400])
             | st.floats(allow_nan=True, allow_subnormal=False) | st.text(max_size=30))
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)


@st.composite
def messages(draw: Any) -> dict[str, Any]:
    message: dict[str, Any] = {}
    if draw(st.booleans()):
        message["type"] = draw(st.sampled_from(["prompt", "interrupt", "PROMPT", "", "speak"]) | json_value)
    for name in draw(st.lists(st.sampled_from(["prompt", "mode", "voice", "extra", "type"]), max_size=3, unique=True)):
        message[name] = draw(json_value | st.sampled_from(["Hi?", "", " ", "bidi", "batch", "x" * 501, "am_michael"]))
    return message


def truncated_utf8(message: dict[str, Any]) -> bytes:
    data = json.dumps(message).encode()[:-1] + ' "déjà ✓"}'.encode()
    return data[:data.index("✓".encode()) + 1]


frames = st.one_of(
    messages().map(json.dumps), messages().map(lambda m: json.dumps(m).encode()), st.binary(max_size=300),
    st.text(max_size=200), messages().map(truncated_utf8), st.integers(1, 50_000).map(lambda n: "[" * n),
    st.integers(MAX_MESSAGE_BYTES + 1, MAX_MESSAGE_BYTES + 2000).map(lambda n: b"{" * n), json_value.map(json.dumps),
)


def parse(raw: str | bytes) -> Any:
    return parse_request(decode_message(raw), max_prompt_chars=500, allow_interrupt=True)


@settings(max_examples=IN_PROCESS_CASES, deadline=None, suppress_health_check=list(HealthCheck))
@given(frames)
def test_any_frame_parses_or_is_refused_with_a_request_error(raw: str | bytes) -> None:
    try:
        parse(raw)
    except ProtocolError as error:
        assert error.code in ERROR_CODES and isinstance(error.message, str)


def is_prompt(raw: str | bytes) -> bool:
    try:
        return isinstance(parse(raw), PromptRequest)
    except ProtocolError:
        return False


@dataclass
class Live:
    """The fuzzed socket, and the agent's asyncio tasks and this process's descriptors before it."""

    ws: Any
    tasks_before: int
    fds_before: int


@pytest.fixture(scope="module")
def live(agent: RunningAgent) -> Iterator[Live]:
    assert wait_until(agent.idle), agent.running()
    tasks_before, fds_before = agent.tasks(), fd_count()
    ws, _ = ws_open(agent.ws_url)
    yield Live(ws=ws, tasks_before=tasks_before, fds_before=fds_before)
    ws.close()
    assert httpx.get(f"{agent.url}/ping", timeout=5).json()["status"] == "Healthy"


@settings(max_examples=LIVE_CASES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(frames.filter(lambda raw: not is_prompt(raw)))  # a valid prompt is a whole turn: not hostile
def test_live_socket_answers_each_hostile_frame_with_one_error_and_stays_open(live: Any, raw: str | bytes) -> None:
    live.ws.send(raw)
    event = json.loads(live.ws.recv(timeout=10))
    assert event["type"] == "error" and event["code"] in ERROR_CODES, event


def test_the_hostile_frames_leave_no_task_or_descriptor_behind(live: Live, agent: RunningAgent) -> None:
    """Runs right after the property (file order), before other tests open anything here: once the
    fuzzed socket closes, the agent's asyncio tasks and this process's descriptors are back."""
    live.ws.close()
    assert wait_until(agent.idle), agent.running()
    assert wait_until(lambda: agent.tasks() <= live.tasks_before), (agent.tasks(), live.tasks_before)
    assert wait_until(lambda: fd_count() <= live.fds_before), (fd_count(), live.fds_before)


# ---- a TTS that comes and goes ----------------------------------------------------------------


class Proxy:
    """A TCP proxy in front of the real TTS server that can refuse connections or cut them."""

    def __init__(self, target: str) -> None:
        parsed = urlparse(target)
        self.target = (parsed.hostname, parsed.port)
        self.port = free_port()
        self.up = True
        self.loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self._started = threading.Event()
        self._stop: asyncio.Future[None] | None = None
        self._thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(Exception):
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.transport.abort()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        self._writers |= {writer, upstream_writer}
        await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))
        self._writers -= {writer, upstream_writer}

    async def _main(self) -> None:
        self._stop = self.loop.create_future()
        server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self._started.set()
        async with server:
            await self._stop

    def cut(self) -> None:
        """Drop every open connection at once, without a close frame."""
        def abort() -> None:
            for writer in list(self._writers):
                writer.transport.abort()
        self.loop.call_soon_threadsafe(abort)

    def __enter__(self) -> "Proxy":
        self._thread.start()
        self._started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._set_stop)
        self._thread.join(10)

    def _set_stop(self) -> None:
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(None)


def text_survived(log: TurnLog) -> None:
    assert log.types[0] == "start" and log.types[-1] == "end"
    assert log.text == ANSWER


def test_tts_down_then_back_the_next_turn_reconnects_and_speaks(tts_url: str) -> None:
    with Proxy(tts_url) as proxy, serve_agent(tts_url=proxy.url) as agent:
        ws, _ = ws_open(agent.ws_url)
        with ws:
            proxy.up = False
            down = ws_turn(ws, {"prompt": "Hello?"})
            text_survived(down)
            assert [e["code"] for e in down.of("error")] == ["tts_failed"] and down.audio == []
            proxy.up = True
            back = ws_turn(ws, {"prompt": "Again?"})
            text_survived(back)
            assert back.of("error") == [] and len(back.audio) > 0 and back.end["tts_ok"] is True
        assert wait_until(agent.idle), agent.running()
    assert wait_until(lambda: tts_idle(tts_url))


def test_tts_dropped_mid_turn_then_the_next_turn_speaks(tts_url: str) -> None:
    with Proxy(tts_url) as proxy, serve_agent(tts_url=proxy.url, token_ms=(20, 30)) as agent:
        ws, _ = ws_open(agent.ws_url)
        with ws:
            ws.send(json.dumps({"prompt": "Talk to me."}))
            log = ws_read_until_audio(ws)
            proxy.cut()  # the TTS connection is gone, mid-turn, audio already flowing
            ws_read_turn(ws, log=log)
            text_survived(log)
            assert [e["code"] for e in log.of("error")] == ["tts_failed"]
            assert log.end["tts_ok"] is False
            after = ws_turn(ws, {"prompt": "And now?"})
            text_survived(after)
            assert after.of("error") == [] and len(after.audio) > 0
        assert wait_until(agent.idle), agent.running()
    assert wait_until(lambda: tts_idle(tts_url))


def test_a_websocket_client_that_stops_reading_is_dropped_with_4002(
    tts_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Back-pressure: a browser that reads nothing is closed after the send timeout instead of
    having its turn's audio held for it without end."""
    import socket

    import websockets

    long_answer = " ".join(f"Sentence {n} of an answer nobody is listening to." for n in range(30))
    caplog.set_level("WARNING", logger="voice_agent")
    with serve_agent(tts_url=tts_url, answer=long_answer, send_timeout_s=2.0) as agent:
        host, port = urlparse(agent.url).hostname, urlparse(agent.url).port

        async def scenario() -> int | None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills within a few frames
            sock.connect((host, port))
            sock.setblocking(False)
            ws = await websockets.connect(agent.ws_url, sock=sock, max_size=None, max_queue=1, open_timeout=10)
            await ws.send(json.dumps({"prompt": "Talk for a long time."}))
            # read nothing until the agent has given up on this client (bounded)
            for _ in range(600):
                if any("read nothing" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.1)
            try:
                for _ in range(100_000):  # then drain what was sent before the agent gave up
                    await asyncio.wait_for(ws.recv(), 10)
            except websockets.ConnectionClosed:
                pass
            except asyncio.TimeoutError:
                pass
            finally:
                ws.transport.abort()
            return ws.close_code

        assert asyncio.run(scenario()) == 4002
        assert wait_until(agent.idle, timeout=30), agent.running()
    assert wait_until(lambda: tts_idle(tts_url)), httpx.get(f"{tts_url}/ping").json()
