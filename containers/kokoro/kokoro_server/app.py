"""The Starlette app: SageMaker's routes over one loaded model.

``GET /ping`` answers 200 only once the model is loaded and warmed up, and never runs inference.
``POST /invocations`` and ``WS /invocations-bidirectional-stream`` share the model through a
fair scheduler (see scheduler.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from .config import Settings
from .invocations import invocations
from .scheduler import FairScheduler
from .session import Session
from .synth import Synthesizer

log = logging.getLogger(__name__)

BUSY_CLOSE_CODE = 1013  # RFC 6455 "Try Again Later"


async def ping(request: Request) -> JSONResponse:
    state = request.app.state
    synth: Synthesizer | None = getattr(state, "synth", None)
    if synth is None or not state.ready:
        return JSONResponse({"status": "loading"}, status_code=503)
    scheduler = synth.scheduler
    return JSONResponse({
        "status": "ok",
        "engine": synth.engine.name,
        "device": synth.engine.device,
        "sessions": state.sessions,
        "queued": scheduler.queued,
        "running": scheduler.running,
    })


async def bidirectional(websocket: WebSocket) -> None:
    await websocket.accept()  # first, before any work: SageMaker wants it within 250 ms
    state = websocket.app.state
    settings: Settings = state.settings
    if not state.ready or state.sessions >= settings.max_sessions:
        reason = "model loading" if not state.ready else f"server busy ({settings.max_sessions} sessions)"
        await websocket.send_json({"type": "error", "code": "busy", "message": reason})
        await websocket.close(code=BUSY_CLOSE_CODE, reason=reason)
        return
    state.sessions += 1
    try:
        asked_to_close = await Session(websocket=websocket, synth=state.synth, settings=settings).run()
    finally:
        state.sessions -= 1
    if asked_to_close:
        with contextlib.suppress(Exception):
            await websocket.close(code=1000)


def create_app(*, settings: Settings, synth_factory) -> Starlette:
    """``synth_factory(scheduler)`` returns a warmed-up Synthesizer; it runs before serving."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.sessions = 0
        app.state.ready = False
        scheduler = FairScheduler(workers=1)
        await scheduler.start()
        app.state.synth = synth_factory(scheduler)
        app.state.ready = True
        try:
            yield
        finally:
            app.state.ready = False
            await scheduler.stop()
            app.state.synth.close()

    return Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            WebSocketRoute("/invocations-bidirectional-stream", bidirectional),
        ],
        lifespan=lifespan,
    )
