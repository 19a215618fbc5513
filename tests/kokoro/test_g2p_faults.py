"""G2P raising on a text: the documented error for that utterance or request, and the server goes on.

No text found still makes misaki raise (test_g2p_hostile.py), so the server here runs in this
process with its real app, scheduler, synthesizer, tiny-model engine and misaki G2P; the only
difference is the Phonemizer's class, a subclass whose ``chunks`` raises OverflowError on a marker
word, as misaki's num2words raised on a 400-digit number before the guard. Nothing of the server
under test is replaced.

* WebSocket: ``error`` ``synthesis_failed`` naming the utterance; the next utterance is spoken.
* POST, failing before any audio (every shape and transport): the response has not started, so it
  is a 500 with a JSON error (OpenAI's shape for OpenAI's body), code ``synthesis_failed``.
* POST, failing after the first sentence's audio: SSE ends with an ``error`` event; raw bytes are
  an aborted body (never a short file that looks whole).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn
from kokoro_harness import free_port
from waiting import wait_until
from wsclient import collect, connect, of_type, send, sse_events

if TYPE_CHECKING:
    from kokoro_server.g2p import PhonemeChunk
    from kokoro_server.scheduler import Scheduler
    from kokoro_server.synth import Synthesizer

pytestmark = pytest.mark.kokoro

MARKER = "Zorbleflax"


@pytest.fixture(scope="module")
def failing(tiny_model: Path) -> Iterator[str]:
    """The base URL of a server whose G2P raises on MARKER."""
    from kokoro_server.__main__ import load
    from kokoro_server.app import create_app, websocket_protocol
    from kokoro_server.config import Settings

    settings = Settings.from_env({"KOKORO_MODEL_DIR": str(tiny_model), "KOKORO_WARMUP": "0"})
    factory = load(settings)

    def failing_factory(scheduler: Scheduler) -> Synthesizer:
        synth = factory(scheduler)
        base = type(synth.phonemizer)

        class FailOnMarker(base):  # type: ignore[misc, valid-type]
            def chunks(self, text: str, *, voice: str, **kwargs: Any) -> list[PhonemeChunk]:
                if MARKER in text:
                    raise OverflowError(f"injected G2P fault on {text!r}")
                chunks: list[PhonemeChunk] = super().chunks(text, voice=voice, **kwargs)
                return chunks

        synth.phonemizer.__class__ = FailOnMarker
        return synth

    port = free_port()
    config = uvicorn.Config(create_app(settings=settings, synth_factory=failing_factory), host="127.0.0.1",
                            port=port, log_level="warning", ws=websocket_protocol())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert wait_until(lambda: server.started, timeout=120)
    yield f"127.0.0.1:{port}"
    server.should_exit = True
    thread.join(15)


def test_the_websocket_names_the_failed_utterance_and_speaks_the_next(failing: str) -> None:
    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with connect(f"ws://{failing}/invocations-bidirectional-stream") as ws:
            await send(ws, {"type": "speak", "id": "bad", "text": f"{MARKER} is here."})
            await send(ws, {"type": "speak", "id": "good", "text": "Hello there."})
            await send(ws, {"type": "flush"})
            first = await collect(ws, of_type("turn_end"))
            await send(ws, {"type": "speak", "id": "later", "text": "Good day."})
            await send(ws, {"type": "flush"})
            return first, await collect(ws, of_type("turn_end"))

    first, second = asyncio.run(scenario())
    assert [(e["type"], e.get("id"), e.get("code")) for e in first if e["type"] != "audio"] == [
        ("utterance_start", "bad", None), ("error", "bad", "synthesis_failed"),
        ("utterance_start", "good", None), ("utterance_end", "good", None), ("turn_end", None, None),
    ]
    assert "OverflowError" in next(e for e in first if e["type"] == "error")["message"]
    assert [e["type"] for e in second if e["type"] != "audio"] == ["utterance_start", "utterance_end", "turn_end"]


TEXT = f"{MARKER} is here."
BODIES = {
    "native bytes": {"text": TEXT},
    "native sse": {"text": TEXT, "transport": "sse"},
    "aws sample stream": {"text": TEXT, "request_id": "r1"},
    "aws sample file": {"text": TEXT, "request_id": "r2", "stream": False},
    "aws sample sse": {"text": TEXT, "request_id": "r3", "transport": "sse"},
    "openai": {"model": "kokoro", "input": TEXT, "voice": "af_heart", "response_format": "pcm"},
    "openai sse": {"model": "kokoro", "input": TEXT, "voice": "af_heart", "stream_format": "sse"},
}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_post_failing_before_any_audio_is_a_500_json_error_and_the_next_post_is_served(
    failing: str, body: dict[str, Any]
) -> None:
    response = httpx.post(f"http://{failing}/invocations", json=body, timeout=60)
    assert response.status_code == 500 and response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "synthesis_failed" and "OverflowError" in error["message"], error
    if "input" in body:
        assert error["type"] == "server_error" and error["param"] is None
    after = httpx.post(f"http://{failing}/invocations", json={"text": "Hello there."}, timeout=60)
    assert after.status_code == 200 and len(after.content) > 0


def test_post_failing_after_the_first_audio_ends_sse_with_an_error_and_aborts_raw_bytes(failing: str) -> None:
    text = f"Hello there. {MARKER} is here."  # the first sentence is spoken, then G2P raises
    sse = httpx.post(f"http://{failing}/invocations", json={"text": text, "transport": "sse"}, timeout=60)
    events = sse_events(sse.text)
    assert sse.status_code == 200 and events[0][0] == "start" and events[1][0] == "audio"
    assert events[-1][0] == "error" and events[-1][1]["code"] == "synthesis_failed"
    with pytest.raises(httpx.HTTPError):  # the chunked body never ends: no client takes it for whole
        httpx.post(f"http://{failing}/invocations", json={"text": text}, timeout=60)
    after = httpx.post(f"http://{failing}/invocations", json={"text": "Hello there."}, timeout=60)
    assert after.status_code == 200 and len(after.content) > 0
