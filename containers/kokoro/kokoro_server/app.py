"""The Starlette app: SageMaker's routes over one loaded model.

``GET /ping`` answers 200 only once the model is loaded and warmed up, and never runs inference.
``POST /invocations`` and ``WS /invocations-bidirectional-stream`` share the model through a
deadline-first scheduler (see scheduler.py). ``/invocations`` takes three body shapes, told apart here at
the edge: OpenAI's speech body (openai_api.py), the AWS sample's (aws_sample.py), and the native
one (invocations.py). OpenAI's routes ``/v1/audio/speech``, ``/v1/audio/voices`` and ``/v1/models``
serve local and self-hosted clients (SageMaker routes only /invocations and /ping).

Close codes of the WebSocket (docs/protocol.md#close-codes): 1000 after `close`, 1001 when the
server stops (SIGTERM: the utterance in flight finishes first, see :func:`drain`), 1009 for a
frame over 1 MiB (uvicorn), 1013 at the session limit, 4001 after the idle timeout, 4002 for a
client that stopped reading (its connection is then aborted, so it holds no socket or buffer either).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicestream.protocol import CloseCode, ErrorEvent, encode_event

from . import openai_api
from .aws_sample import respond_sample, sample_payload
from .config import Settings
from .invocations import native, read_body, too_large
from .metrics import report_load
from .middleware import RefuseWhileDraining, RequestIds
from .outbox import WRITE_BUFFER_EXTENSION
from .scheduler import Scheduler
from .session import CLOSE, DRAINED, GOING_AWAY_MESSAGE, IDLE, STALLED, Session
from .synth import Synthesizer

log = logging.getLogger(__name__)

BUSY_CLOSE_CODE = CloseCode.BUSY  # at KOKORO_MAX_SESSIONS
IDLE_CLOSE_CODE = CloseCode.IDLE  # no message and nothing to speak for KOKORO_IDLE_TIMEOUT_S
STALLED_CLOSE_CODE = CloseCode.STALLED  # the client read nothing for KOKORO_SEND_TIMEOUT_S while audio waited
# The scope extension through which the server's WebSocket protocol (AbortableWebSocketProtocol)
# lets the app cut a connection whose peer stopped reading: a close frame cannot reach it.
ABORT_EXTENSION = "kokoro.abort"


def _status(request: Request) -> tuple[JSONResponse | None, dict[str, object]]:
    """(an answer for a server that is loading or draining, else None; the serving state)."""
    state = request.app.state
    synth: Synthesizer | None = getattr(state, "synth", None)
    if synth is None or not state.ready:
        return JSONResponse({"status": "loading"}, status_code=503), {}
    if state.draining:  # stopping: route nothing new here
        return JSONResponse({"status": "draining", "sessions": state.sessions}, status_code=503), {}
    settings: Settings = state.settings
    return None, {
        "status": "ok",
        "engine": synth.engine.name,
        "device": synth.engine.device,
        "sessions": state.sessions,
        "max_sessions": settings.max_sessions,
        "busy": state.sessions >= settings.max_sessions,  # new sessions are refused with 1013
        "queued": synth.scheduler.queued,
        "running": synth.scheduler.running,
    }


async def ping(request: Request) -> JSONResponse:
    """SageMaker's health check: 200 while the server takes work, 503 loading or draining."""
    refusal, status = _status(request)
    return refusal or JSONResponse(status)


async def diagnostics(request: Request) -> JSONResponse:
    """``/ping``'s state and what tests, benchmarks and an operator look into: leaks, memory held,
    the decoder cost windows are sized by. Not for routing: SageMaker never calls it."""
    refusal, status = _status(request)
    if refusal is not None:
        return refusal
    state = request.app.state
    synth: Synthesizer = state.synth
    scheduler = synth.scheduler
    return JSONResponse({
        **status,
        "settled": scheduler.settled,  # idle, with the idle trim done: memory readings hold still
        # model jobs that finished for a session or request that no longer exists: at most one per
        # client that left while its job was on the model (tests/kokoro/test_hardening_vanish.py)
        "orphaned_jobs": scheduler.orphaned,
        # the most outgoing bytes one live session holds (its outbox, the frame being written, its
        # transport's write buffer): bounded by outbox.HELD_BYTES_MAX (tests/kokoro/test_hardening_faults.py)
        "held_bytes_max": max((session.held_bytes() for session in list(state.live)), default=0),
        "tasks": len(asyncio.all_tasks()),  # asyncio tasks alive in the server: a leak shows here
        # the decoder cost windows are sized by (sizing.Cost: fitted to windows decoded at warm-up,
        # then to those served; or KOKORO_DECODER_PACE): benchmarks pin the pace so that servers they
        # compare size alike (a pinned pace is never fitted)
        "decoder_pace": synth.cost.pace,
        "decoder_overhead_s": synth.cost.overhead,
    })


async def invocations(request: Request) -> Response:
    """``POST /invocations``: OpenAI's body (it has ``input``), the AWS sample's (it has
    ``request_timestamp``, ``request_id`` or ``stream``), else the native one."""
    body = await read_body(request)
    if body is None:
        return too_large()
    synth: Synthesizer = request.app.state.synth
    if (payload := openai_api.openai_body(body)) is not None:
        return await openai_api.respond(synth, payload)
    if (payload := sample_payload(body)) is not None:
        return await respond_sample(request, synth, payload)
    return await native(request, synth, body)


async def bidirectional(websocket: WebSocket) -> None:
    await websocket.accept()  # first, before any work: SageMaker wants it within 250 ms
    state = websocket.app.state
    settings: Settings = state.settings
    if not state.ready or state.draining or state.sessions >= settings.max_sessions:
        reason = ("model loading" if not state.ready else "server stopping" if state.draining
                  else f"server busy ({settings.max_sessions} sessions)")
        await websocket.send_text(encode_event(ErrorEvent(code="busy", message=reason)))
        await websocket.close(code=BUSY_CLOSE_CODE, reason=reason)
        return
    state.sessions += 1
    session = Session(websocket=websocket, synth=state.synth, settings=settings)
    state.live.add(session)
    try:
        outcome = await session.run()
    finally:
        state.sessions -= 1
        state.live.discard(session)
    if outcome == CLOSE:
        with contextlib.suppress(Exception):
            await websocket.close(code=CloseCode.NORMAL)
    elif outcome == IDLE:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(websocket.close(code=IDLE_CLOSE_CODE, reason="idle timeout"), 5.0)
    elif outcome == STALLED:
        await _drop(websocket, settings.send_timeout_s)
    elif outcome == DRAINED:
        await _drop(websocket, 5.0, code=CloseCode.GOING_AWAY, reason=GOING_AWAY_MESSAGE)


async def drain(app: Starlette) -> None:
    """SIGTERM's first step (serve.DrainingServer): refuse new sessions and requests (/ping says
    ``draining``), let each session finish the utterance it is speaking within
    ``KOKORO_DRAIN_S``, then close it with 1001. Requests already running go on; uvicorn's own
    shutdown then waits for them."""
    state = app.state
    settings: Settings = state.settings
    state.draining = True
    loop = asyncio.get_running_loop()
    by = loop.time() + settings.drain_s
    log.info("draining %d session(s) (at most %.0f s)", state.sessions, settings.drain_s)
    while state.live and loop.time() < by + 6.0:  # + the close's own bound (_drop)
        for session in list(state.live):
            session.drain(by=by)
        await asyncio.sleep(0.05)
    log.info("drained; %d session(s) left", state.sessions)


async def _drop(websocket: WebSocket, grace_s: float, *, code: int = STALLED_CLOSE_CODE,
                reason: str = "client not reading") -> None:
    """Close with ``code`` (4002: a client that stopped reading); if the close does not get through
    within ``grace_s`` (the close frame waits behind the audio it left unread), abort the connection."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(websocket.close(code=code, reason=reason), grace_s)
        return
    abort = websocket.scope.get("extensions", {}).get(ABORT_EXTENSION)
    if abort is not None:
        abort()
        log.warning("aborted the connection of a client that read nothing")


def websocket_protocol() -> type | str:
    """uvicorn's WebSocket protocol with ABORT_EXTENSION in each connection's scope ("auto" when
    uvicorn's sans-I/O protocol is not there to extend)."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    except ImportError:  # pragma: no cover
        return "auto"

    class AbortableWebSocketProtocol(WebSocketsSansIOProtocol):
        async def run_asgi(self) -> None:
            extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
            extensions[ABORT_EXTENSION] = self.transport.abort
            extensions[WRITE_BUFFER_EXTENSION] = self.transport.get_write_buffer_size
            await super().run_asgi()

    return AbortableWebSocketProtocol


def create_app(
    *, settings: Settings, synth_factory: Callable[[Scheduler], Synthesizer],
    scheduler_class: type[Scheduler] | None = None,
) -> Starlette:
    """``synth_factory(scheduler)`` returns a warmed-up Synthesizer; it runs before serving.
    ``scheduler_class``: the model queue's class (a benchmark's variant; the server's own by default)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.sessions = 0
        app.state.live = set()  # the live sessions, for /ping's held_bytes_max
        app.state.ready = False
        app.state.draining = False
        scheduler = (scheduler_class or Scheduler)(workers=1, first_audio_s=settings.first_audio_s,
                                                     idle_after_s=settings.memory_trim_after_s)
        await scheduler.start()
        app.state.synth = synth_factory(scheduler)
        app.state.ready = True
        reporter = asyncio.create_task(report_load(lambda: {
            "sessions": app.state.sessions, "queued": scheduler.queued, "running": scheduler.running,
        }), name="metrics-load")
        try:
            yield
        finally:
            reporter.cancel()
            app.state.ready = False
            await scheduler.stop()
            app.state.synth.close()

    return Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/diagnostics", diagnostics, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            WebSocketRoute("/invocations-bidirectional-stream", bidirectional),
            Route("/v1/audio/speech", openai_api.speech, methods=["POST"]),
            Route("/v1/audio/voices", openai_api.voices, methods=["GET"]),
            Route("/v1/models", openai_api.models, methods=["GET"]),
            Route("/v1/models/{model:path}", openai_api.model, methods=["GET"]),
        ],
        middleware=[Middleware(RequestIds), Middleware(RefuseWhileDraining)],
        lifespan=lifespan,
    )
