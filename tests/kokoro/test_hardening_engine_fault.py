"""The engine raising mid-utterance: an error frame (or SSE error event), and the next turn works.

The server runs in this process with its real app, scheduler, synthesizer and tiny-model engine;
the only difference is the engine's class, a subclass defined here whose ``begin`` (the front, run
once per chunk before its windows) raises on a marker phoneme ("z"), the way a real engine raises
on an input it cannot take. Nothing of the
server under test is replaced.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn
from kokoro_harness import free_port
from waiting import wait_until
from wsclient import collect, connect, of_type, send

if TYPE_CHECKING:
    import numpy as np

    from kokoro_server.engines import Decoding
    from kokoro_server.engines.halt import Halt
    from kokoro_server.scheduler import Scheduler
    from kokoro_server.synth import Synthesizer

pytestmark = pytest.mark.kokoro

MARKER = "z"  # "Zebras zigzag." phonemizes with it; "Hello there." and "Good day to you." do not


class Running:
    def __init__(self, port: int, server: uvicorn.Server) -> None:
        self.port, self.server = port, server
        self.http = f"http://127.0.0.1:{port}"
        self.ws = f"ws://127.0.0.1:{port}/invocations-bidirectional-stream"

    def diagnostics(self) -> dict[str, Any]:
        status: dict[str, Any] = httpx.get(f"{self.http}/diagnostics", timeout=5).json()
        return status

    def wait_idle(self) -> dict[str, Any]:
        return wait_until(self.diagnostics, until=lambda s: (s["sessions"], s["queued"], s["running"]) == (0, 0, 0),
                          timeout=10)


@pytest.fixture(scope="module")
def faulty(tiny_model: Path) -> Iterator[Running]:
    from kokoro_server.__main__ import load
    from kokoro_server.app import create_app, websocket_protocol
    from kokoro_server.config import Settings

    settings = Settings.from_env({"KOKORO_MODEL_DIR": str(tiny_model), "KOKORO_WARMUP": "0"})
    factory = load(settings)

    def faulty_factory(scheduler: Scheduler) -> Synthesizer:
        synth = factory(scheduler)
        base = type(synth.engine)

        class FaultOnMarker(base):  # type: ignore[misc, valid-type]
            def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
                if MARKER in phonemes:
                    raise RuntimeError(f"injected engine fault on {phonemes!r}")
                decoding: Decoding = super().begin(phonemes, style, speed, halt=halt)
                return decoding

        synth.engine.__class__ = FaultOnMarker
        return synth

    port = free_port()
    config = uvicorn.Config(create_app(settings=settings, synth_factory=faulty_factory), host="127.0.0.1",
                            port=port, log_level="warning", ws=websocket_protocol(), ws_max_size=1024 * 1024)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert wait_until(lambda: server.started, timeout=120)
    yield Running(port, server)
    server.should_exit = True
    thread.join(15)


def test_an_engine_fault_mid_utterance_is_an_error_frame_and_the_next_turn_works(faulty: Running) -> None:
    before = faulty.wait_idle()["tasks"]

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with connect(faulty.ws) as ws:
            # the fault hits the second sentence of "mixed", after its first sentence's audio
            await send(ws, {"type": "speak", "id": "mixed", "text": "Hello there. Zebras zigzag. Good day to you."})
            await send(ws, {"type": "speak", "id": "fine", "text": "Good day to you."})
            await send(ws, {"type": "flush"})
            first = await collect(ws, of_type("turn_end"))
            await send(ws, {"type": "speak", "id": "next", "text": "Hello there."})
            await send(ws, {"type": "flush"})
            second = await collect(ws, of_type("turn_end"))
            return first, second

    first, second = asyncio.run(scenario())
    control = [(e["type"], e.get("id"), e.get("code")) for e in first if e["type"] != "audio"]
    assert control == [("utterance_start", "mixed", None), ("error", "mixed", "synthesis_failed"),
                       ("utterance_start", "fine", None), ("utterance_end", "fine", None), ("turn_end", None, None)]
    error_at = next(i for i, e in enumerate(first) if e["type"] == "error")
    assert any(e["type"] == "audio" for e in first[:error_at])  # the first sentence was heard
    assert "injected engine fault" in first[error_at]["message"]
    assert first[-1]["utterances"] == 1
    assert [e["type"] for e in second if e["type"] != "audio"] == ["utterance_start", "utterance_end", "turn_end"]
    status = faulty.wait_idle()
    assert (status["queued"], status["running"]) == (0, 0)
    # the failed utterance's G2P task and jobs did not outlive it
    assert wait_until(faulty.diagnostics, until=lambda s: s["tasks"] <= before, timeout=5)["tasks"] <= before


def test_a_failed_long_utterance_leaves_no_task_or_job_behind_while_the_session_lives(faulty: Running) -> None:
    """The fault hits the first of many sentences: the rest of the utterance is dropped at once,
    not synthesized for nobody, and its G2P task does not wait forever on a full queue."""
    rest = " ".join(f"Good day to you number {n}." for n in range(8))

    async def scenario() -> tuple[int, int, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        async with connect(faulty.ws) as ws:
            await send(ws, {"type": "ping"})
            await collect(ws, of_type("pong"))
            open_session = (await loop.run_in_executor(None, faulty.diagnostics))["tasks"]
            await send(ws, {"type": "speak", "id": "doomed", "text": f"Zebras zigzag. {rest}"})
            await send(ws, {"type": "flush"})
            events = await collect(ws, of_type("turn_end"))
            assert [e["code"] for e in events if e["type"] == "error"] == ["synthesis_failed"]
            # the failed utterance's task and jobs are gone, the session lives
            def settled(status: dict[str, Any]) -> bool:
                return status["tasks"] <= open_session and (status["queued"], status["running"]) == (0, 0)

            after = await loop.run_in_executor(None, lambda: wait_until(faulty.diagnostics, until=settled, timeout=10))
            return open_session, after["tasks"], after

    open_session, after_tasks, status = asyncio.run(scenario())
    assert after_tasks <= open_session, (after_tasks, open_session)
    assert (status["queued"], status["running"]) == (0, 0)


def test_an_engine_fault_over_post_is_an_sse_error_event_or_an_aborted_body(faulty: Running) -> None:
    body = {"text": "Hello there. Zebras zigzag. Good day to you.", "transport": "sse"}
    response = httpx.post(f"{faulty.http}/invocations", json=body, timeout=60)
    events = [block.split("\n", 1)[0].removeprefix("event: ") for block in response.text.strip().split("\n\n")]
    assert events[0] == "start" and events[-1] == "error" and "audio" in events
    error = json.loads(response.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert error["code"] == "synthesis_failed"
    with pytest.raises(httpx.HTTPError):  # binary: HTTP cannot take the 200 back, the body is cut short
        httpx.post(f"{faulty.http}/invocations", json={"text": "Hello there. Zebras zigzag."}, timeout=60)
    ok = httpx.post(f"{faulty.http}/invocations", json={"text": "Good day to you."}, timeout=60)
    assert ok.status_code == 200 and len(ok.content) > 0
    status = faulty.wait_idle()
    assert (status["queued"], status["running"]) == (0, 0)
