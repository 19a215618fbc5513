"""The local transports (WebSocket session, HTTP /invocations) against the REAL Kokoro server.

The pipelining test asserts the order of what was sent and received, never timings. The dropped
connection test uses a tiny websockets server of its own that drops mid-turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import pytest
from kokoro_server_fixture import KokoroServer
from websockets.asyncio.server import ServerConnection, serve

from voicestream.clients import (
    AudioChunk,
    Cancelled,
    Configured,
    ErrorEvent,
    LocalHttpTts,
    Pong,
    TtsConnectionError,
    TtsEvent,
    TtsServerError,
    TtsSession,
    TtsTimeoutError,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
    WebSocketTransport,
    connect_local,
)
from voicestream.clients.base import RESUME_ATTEMPTS
from voicestream.protocol import SynthesisRequest

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    """Run one test body; a hang fails the test instead of the whole run."""
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


async def collect(events: AsyncIterator[TtsEvent]) -> list[TtsEvent]:
    return [event async for event in events]


def check_turn(events: list[TtsEvent], texts: list[str]) -> TurnEnd:
    """Each utterance: start, its audio, end (bytes add up), in order; then turn_end."""
    starts = [e for e in events if isinstance(e, UtteranceStart)]
    assert [s.text for s in starts] == texts
    current: str | None = None
    received: dict[str, int] = {}
    for event in events:
        if isinstance(event, UtteranceStart):
            assert current is None, "an utterance started before the previous one ended"
            current = event.id
        elif isinstance(event, AudioChunk):
            assert event.utterance_id == current and current is not None
            received[current] = received.get(current, 0) + len(event.data)
        elif isinstance(event, UtteranceEnd):
            assert event.id == current
            assert event.bytes == received[event.id] > 0 and event.audio_ms > 0
            current = None
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.utterances == len(texts)
    return end


def test_three_turns_on_one_session(kokoro_server: KokoroServer) -> None:
    async def body() -> list[TurnEnd]:
        async with await connect_local(kokoro_server.url, receive_timeout=30) as session:
            configured = await session.configure(voice="am_michael", speed=1.1)
            assert isinstance(configured, Configured)
            assert configured.voice == "am_michael" and configured.speed == pytest.approx(1.1)
            assert "af_heart" in configured.voices and configured.limits["max_frame_bytes"] > 0
            ends = []
            turns = [["Hello there."], ["How are you?", "Fine, thanks."], ["Bye now."]]
            for texts in turns:
                ends.append(check_turn(await collect(session.speak_stream(texts)), texts))
            await session.ping()
            assert isinstance(await anext(session.events()), Pong)
            return ends

    ends = run(body())
    assert [e.turn for e in ends] == [1, 2, 3]


def test_speak_returns_ids_and_deltas_are_cut_by_the_server(kokoro_server: KokoroServer) -> None:
    async def body() -> list[TtsEvent]:
        async with await connect_local(kokoro_server.url, receive_timeout=30) as session:
            uid = await session.speak("One sentence.", id="mine-1")
            assert uid == "mine-1"
            assert await session.speak("Another.") != await session.speak("Third.")
            await session.delta("Tokens arrive")
            await session.delta(" in pieces. And more")
            await session.flush()
            events: list[TtsEvent] = []
            async for event in session.events():
                events.append(event)
                if isinstance(event, TurnEnd):
                    break  # leaving events() unclosed must not block the next reader
            check_turn(await collect(session.speak_stream(["After."])), ["After."])
            return events

    events = run(body())
    starts = [e for e in events if isinstance(e, UtteranceStart)]
    assert starts[0].id == "mine-1"
    assert [s.text for s in starts][3:] == ["Tokens arrive in pieces.", "And more"]
    check_turn(events, [s.text for s in starts])


class RecordingTransport:
    """Wraps the real transport and logs every frame in one list, in the order they happened."""

    def __init__(self, inner: WebSocketTransport, log: list[tuple[str, Any]]) -> None:
        self._inner = inner
        self._log = log

    async def send_text(self, data: str) -> None:
        await self._inner.send_text(data)
        self._log.append(("sent", json.loads(data)))

    async def send_bytes(self, data: bytes) -> None:
        await self._inner.send_bytes(data)

    async def receive(self) -> str | bytes:
        frame = await self._inner.receive()
        self._log.append(("received", json.loads(frame) if isinstance(frame, str) else b"audio"))
        return frame

    async def close(self) -> None:
        await self._inner.close()


def test_speak_stream_is_pipelined(kokoro_server: KokoroServer) -> None:
    sentences = ["The first sentence is a fairly long one, so it takes a while.", "Second.", "Third.", "Last."]
    log: list[tuple[str, Any]] = []
    first_audio = asyncio.Event()

    async def source() -> AsyncIterator[str]:
        for sentence in sentences[:-1]:
            yield sentence
        # Only reachable if the caller reads audio while the source is still producing.
        await asyncio.wait_for(first_audio.wait(), 30)
        yield sentences[-1]

    async def body() -> list[TtsEvent]:
        plain = await connect_local(kokoro_server.url, receive_timeout=30)
        assert isinstance(plain._transport, WebSocketTransport)
        session = TtsSession(transport=RecordingTransport(plain._transport, log), receive_timeout=30)
        events = []
        async for event in session.speak_stream(source()):
            if isinstance(event, AudioChunk):
                first_audio.set()
            events.append(event)
        await session.close()
        return events

    events = run(body())
    check_turn(events, sentences)

    def index(direction: str, predicate: Any) -> int:
        return next(i for i, (d, f) in enumerate(log) if d == direction and predicate(f))

    sent_2 = index("sent", lambda f: f.get("text") == sentences[1])
    end_1 = index("received", lambda f: isinstance(f, dict) and f.get("type") == "utterance_end")
    audio_1 = index("received", lambda f: f == b"audio")
    sent_last = index("sent", lambda f: f.get("text") == sentences[-1])
    flushed = index("sent", lambda f: f.get("type") == "flush")
    assert sent_2 < end_1, "sentence 2 waited for sentence 1's audio"
    assert audio_1 < sent_last < flushed


def test_server_errors_are_typed_with_the_servers_message(kokoro_server: KokoroServer) -> None:
    async def body() -> None:
        async with await connect_local(kokoro_server.url, receive_timeout=30) as session:
            with pytest.raises(TtsServerError) as bad_voice:
                await session.configure(voice="no_such_voice")
            assert bad_voice.value.code == "unknown_voice" and bad_voice.value.field == "voice"
            assert "no_such_voice" in bad_voice.value.message and "af_heart" in bad_voice.value.message
            with pytest.raises(TtsServerError) as bad_speed:
                async for _ in session.speak_stream(["Too fast."], speed=9.0):
                    pass
            assert bad_speed.value.field == "speed" and "between 0.5 and 2.0" in bad_speed.value.message
            # The session survives an error frame: the next turn is spoken normally.
            check_turn(await collect(session.speak_stream(["Still here."])), ["Still here."])

    run(body())


def test_the_language_goes_through_configure_and_speak(kokoro_server: KokoroServer) -> None:
    """``lang`` (Kokoro's codes) reaches the server from both calls; a code it is not is refused, named."""
    async def body() -> None:
        async with await connect_local(kokoro_server.url, receive_timeout=60) as session:
            configured = await session.configure(lang="j")
            assert configured is not None and configured.lang == "j" and configured.languages["e"] == "Spanish"
            check_turn(await collect(session.speak_stream(["こんにちは。"])), ["こんにちは。"])
            check_turn(await collect(session.speak_stream(["¡Hola!"], lang="e")), ["¡Hola!"])
            with pytest.raises(TtsServerError) as bad:
                async for _ in session.speak_stream(["Hello."], lang="english"):
                    pass
            assert bad.value.field == "lang" and "a (American English)" in bad.value.message

    run(body())


def test_errors_as_events_when_asked(kokoro_server: KokoroServer) -> None:
    async def body() -> list[TtsEvent]:
        async with await connect_local(kokoro_server.url, receive_timeout=30, raise_errors=False) as session:
            return await collect(session.speak_stream(["Fine.", "Bad voice."], voice="nobody"))

    events = run(body())
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 2 and all(e.code == "unknown_voice" for e in errors)
    assert isinstance(events[-1], TurnEnd) and events[-1].utterances == 0


def test_leaving_speak_stream_early_cancels_and_the_next_turn_is_clean(kokoro_server: KokoroServer) -> None:
    async def body() -> tuple[list[TtsEvent], list[TtsEvent]]:
        async with await connect_local(kokoro_server.url, receive_timeout=30) as session:
            seen: list[TtsEvent] = []
            async with asyncio.timeout(30):
                stream = session.speak_stream(["A first long sentence to interrupt.", "More.", "And more."])
                async for event in stream:
                    seen.append(event)
                    if isinstance(event, AudioChunk):
                        break
                await stream.aclose()
            return seen, await collect(session.speak_stream(["Next turn."]))

    seen, after = run(body())
    assert isinstance(seen[-1], AudioChunk)
    assert not any(isinstance(e, Cancelled) for e in after)
    check_turn(after, ["Next turn."])


async def _dropping_server(handler_mode: str) -> tuple[Any, int]:
    async def handler(ws: ServerConnection) -> None:
        await ws.recv()  # the speak
        await ws.send(json.dumps({"type": "utterance_start", "id": "u1", "turn": 1, "text": "x"}))
        await ws.send(b"\x00\x01" * 100)
        if handler_mode == "drop":
            ws.transport.abort()  # TCP reset: no close frame, like a crashed server
        elif handler_mode == "going_away":  # says it is stopping, then stops, without finishing
            await ws.send(json.dumps({"type": "error", "code": "going_away", "message": "server stopping"}))
            await ws.close(1001)
        else:
            await asyncio.sleep(60)  # silent: only the receive timeout can notice

    server = await serve(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, port


def test_a_dropped_connection_mid_turn_raises_promptly() -> None:
    async def body() -> list[TtsEvent]:
        server, port = await _dropping_server("drop")
        seen: list[TtsEvent] = []
        try:
            session = await connect_local(f"http://127.0.0.1:{port}", receive_timeout=None)
            with pytest.raises(TtsConnectionError) as info:
                async for event in session.speak_stream(["Hello."]):
                    seen.append(event)
            assert not isinstance(info.value, TtsTimeoutError)
            await session.close()
        finally:
            server.close()
        return seen

    seen = run(body(), timeout=15)
    assert isinstance(seen[0], UtteranceStart) and isinstance(seen[1], AudioChunk)


def test_a_server_that_keeps_going_away_ends_the_session_after_bounded_resumes() -> None:
    """A server that says it is stopping is resumed from (the default): the speak is sent again on
    each new connection. One that never answers it ends the session after RESUME_ATTEMPTS."""

    async def body() -> tuple[list[TtsEvent], str, int]:
        server, port = await _dropping_server("going_away")
        seen: list[TtsEvent] = []
        try:
            session = await connect_local(f"http://127.0.0.1:{port}", receive_timeout=None)
            with pytest.raises(TtsConnectionError) as info:
                async for event in session.speak_stream(["Hello."]):
                    seen.append(event)
            resumes = session.resumes
            await session.close()
        finally:
            server.close()
        return seen, str(info.value), resumes

    seen, message, resumes = run(body(), timeout=30)
    assert resumes == RESUME_ATTEMPTS
    assert message.endswith(f"(gave up after {RESUME_ATTEMPTS} new connections without an answer)")
    starts = [e for e in seen if isinstance(e, UtteranceStart)]
    assert len(starts) == RESUME_ATTEMPTS + 1  # the same speak, sent again on each connection


def test_a_silent_server_hits_the_receive_timeout() -> None:
    async def body() -> None:
        server, port = await _dropping_server("silent")
        try:
            session = await connect_local(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream",
                                          receive_timeout=0.5)
            with pytest.raises(TtsTimeoutError):
                async for _ in session.speak_stream(["Hello."]):
                    pass
            await session.close()
        finally:
            server.close()

    run(body(), timeout=15)


def test_connecting_to_nothing_is_a_connection_error() -> None:
    with socket_port() as port:
        with pytest.raises(TtsConnectionError, match="cannot connect"):
            run(connect_local(f"http://127.0.0.1:{port}", open_timeout=5), timeout=15)


class socket_port:
    """A port nobody listens on (bound, not listening, for the duration)."""

    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        return int(self._sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


def test_http_binary_sse_and_wav(kokoro_server: KokoroServer) -> None:
    async def body() -> tuple[bytes, bytes, bytes]:
        async with LocalHttpTts(base_url=kokoro_server.url) as tts:
            text = "Hello there. This is the second sentence."
            raw = b"".join([c async for c in tts.stream(SynthesisRequest(text=text))])
            sse = b"".join([c async for c in tts.stream(SynthesisRequest(text=text, transport="sse"))])
            wav = b"".join([c async for c in tts.stream(SynthesisRequest(text="Hi.", format="wav"))])
            return raw, sse, wav

    raw, sse, wav = run(body())
    assert len(raw) > 24_000 and len(raw) % 2 == 0
    assert len(sse) == len(raw)  # same text, same durations: the same number of samples
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"


def test_http_400_is_a_typed_server_error(kokoro_server: KokoroServer) -> None:
    async def body() -> None:
        async with LocalHttpTts(base_url=kokoro_server.url + "/invocations") as tts:
            with pytest.raises(TtsServerError) as info:
                async for _ in tts.stream(SynthesisRequest(text="Hi.", speed=5.0)):
                    pass
            assert info.value.status == 400 and info.value.field == "speed"
            assert "between 0.5 and 2.0" in info.value.message

    run(body())


def test_http_to_nothing_is_a_connection_error() -> None:
    async def body() -> None:
        with socket_port() as port:
            async with LocalHttpTts(base_url=f"http://127.0.0.1:{port}") as tts:
                async for _ in tts.stream(SynthesisRequest(text="Hi.")):
                    pass

    with pytest.raises(TtsConnectionError, match="cannot reach"):
        run(body(), timeout=15)
