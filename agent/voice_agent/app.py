"""The AgentCore app: ``POST /invocations`` (SSE), ``WS /ws``, ``GET /ping``, and locally ``GET /``.

Both transports carry the same events (docs/agent.md#protocol); they differ only in framing:
SSE sends audio as base64 inside ``audio`` events, the WebSocket as binary frames beside its JSON
events, and only the WebSocket can be interrupted mid-turn from the same connection (SSE takes
``{"type": "interrupt"}`` as a second request in the same AgentCore session).

AgentCore runs async-generator entrypoints on its own worker loop in another thread, so SSE turns
and WebSocket turns live on different loops; the :class:`~voice_agent.speaking.TurnRegistry` is
thread-safe for that reason, and a conversation is only ever touched from one loop.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from bedrock_agentcore import BedrockAgentCoreApp
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketState
from strands import Agent

from voicestream.protocol import CloseCode, ProtocolError
from voicestream.protocol.sse import sse_frame

from .config import AgentConfig
from .events import AgentError, AudioData, Interrupted, InterruptSent, Ready
from .messages import MAX_MESSAGE_BYTES, InterruptRequest, PromptRequest, decode_message, parse_request
from .models import ModelFactory, model_factory
from .speaking import Audio, TtsConnector, Turn, TurnItem, TurnRegistry

log = logging.getLogger(__name__)

MAX_SSE_CONVERSATIONS = 64  # AgentCore gives each session its own microVM; locally, a bound
VOICES_TIMEOUT_S = 3.0  # asking the TTS server for its voices holds the first `ready` at most this long
VOICES_RETRY_S = 60.0


@dataclass(frozen=True)
class Voices:
    """The TTS server's voices and its languages (code -> name): what the page's picker offers."""

    names: tuple[str, ...] = ()
    languages: dict[str, str] = field(default_factory=dict)


class Conversation:
    """One agent (its history) and its current turn; owned by one client connection or session."""

    def __init__(self, *, agent: Agent, service: VoiceService) -> None:
        self.agent = agent
        self._service = service
        self.turn: Turn | None = None
        self._turns = 0

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.finished

    def start(self, request: PromptRequest) -> Turn:
        self._turns += 1
        self.turn = Turn(number=self._turns, request=request, agent=self.agent, connect_tts=self._service.connect_tts,
                         registry=self._service.registry, voice=self._service.config.voice)
        return self.turn


class VoiceService:
    """What every connection shares: settings, model factory, TTS connector, running turns."""

    def __init__(self, *, config: AgentConfig, models: ModelFactory, connect_tts: TtsConnector | None,
                 registry: TurnRegistry) -> None:
        self.config = config
        self.models = models
        self.connect_tts = connect_tts
        self.registry = registry
        self._sse: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()
        self._voices: Voices | None = None
        self._voices_retry_at = 0.0

    def new_conversation(self) -> Conversation:
        agent = Agent(model=self.models(), system_prompt=self.config.system_prompt, callback_handler=None)
        return Conversation(agent=agent, service=self)

    def sse_conversation(self, session_id: str | None, *, create: bool = True) -> Conversation | None:
        """The conversation of an AgentCore session id; without an id every request is its own."""
        if session_id is None:
            return self.new_conversation() if create else None
        with self._lock:
            found = self._sse.get(session_id)
            if found is not None:
                self._sse.move_to_end(session_id)
                return found
            if not create:
                return None
            conversation = self.new_conversation()
            self._sse[session_id] = conversation
            while len(self._sse) > MAX_SSE_CONVERSATIONS:
                oldest = next(iter(self._sse))
                if self._sse[oldest].busy:
                    break
                del self._sse[oldest]
            return conversation

    async def voices(self) -> Voices:
        """The TTS server's voices and languages (its ``configured`` event), for the page's picker:
        asked once (a failure is asked again after VOICES_RETRY_S), at most VOICES_TIMEOUT_S; empty
        if unknown."""
        if self.connect_tts is None or (self._voices is None and time.monotonic() < self._voices_retry_at):
            return self._voices or Voices()
        if self._voices is None:
            try:
                self._voices = await asyncio.wait_for(self._ask_voices(), VOICES_TIMEOUT_S)
            except Exception as exc:  # the page then offers no picker; speech still works
                log.info("could not list the TTS voices: %s", exc)
                self._voices_retry_at = time.monotonic() + VOICES_RETRY_S
        return self._voices or Voices()

    async def _ask_voices(self) -> Voices:
        assert self.connect_tts is not None
        session = await self.connect_tts()
        try:
            configured = await session.configure()
            if configured is None:
                return Voices()
            return Voices(names=tuple(configured.voices), languages=dict(configured.languages))
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.close(), 2.0)

    def ready_event(self, *, voices: Voices | None = None) -> Ready:
        """What the page shows: no secrets, just what answers and who speaks (and in which languages)."""
        config, voices = self.config, voices or Voices()
        return Ready(model=config.model, model_id=config.model_id if config.model == "bedrock" else "offline-scripted",
                     offline_reason=config.offline_reason, tts=config.tts_kind, voice=config.voice,
                     max_prompt_chars=config.max_prompt_chars, voices=voices.names, languages=voices.languages)


def tts_connector(config: AgentConfig) -> TtsConnector | None:
    """Open a TTS session on the configured target: a local server URL or a SageMaker endpoint."""
    if config.tts_url:
        url = config.tts_url

        async def local() -> Any:
            from voicestream.clients import connect_local

            return await connect_local(url, raise_errors=False)

        return local
    if config.tts_endpoint:
        endpoint, region = config.tts_endpoint, config.region

        async def sagemaker() -> Any:
            from voicestream.clients import connect_sagemaker

            return await connect_sagemaker(endpoint, region=region, raise_errors=False)

        return sagemaker
    return None


def sse_item(item: TurnItem) -> dict[str, Any]:
    """SSE framing: audio as a base64 ``audio`` event; AgentCore encodes each object as one event."""
    if isinstance(item, Audio):
        return AudioData(turn=item.turn, seq=item.seq, utterance_id=item.utterance_id, bytes=len(item.data),
                         audio=base64.b64encode(item.data).decode("ascii"), t_ms=item.t_ms).to_wire()
    return item.to_wire()


class JsonBodyGuard:
    """AgentCore answers a malformed ``/invocations`` body with a bare 400; turn it into the same
    ``error`` event every other bad input gets, and bound the body size while at it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != "/invocations" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_MESSAGE_BYTES:
                await _sse_error(scope, receive, send, ProtocolError(
                    "message_too_large", f"request body is over {MAX_MESSAGE_BYTES} bytes"))
                return
            if not message.get("more_body", False):
                break
        try:
            decode_message(bytes(body))
        except ProtocolError as exc:
            await _sse_error(scope, receive, send, exc)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _sse_error(scope: Scope, receive: Receive, send: Send, exc: ProtocolError) -> None:
    data = sse_frame(AgentError.of(exc).to_wire())  # AgentCore's framing: data lines only
    await Response(data, media_type="text/event-stream")(scope, receive, send)


def create_app(*, config: AgentConfig, models: ModelFactory | None = None,
               connect_tts: TtsConnector | None = None, use_config_tts: bool = True) -> BedrockAgentCoreApp:
    """Build the app. Tests pass ``models`` (a scripted model) and may pass ``connect_tts``."""
    app = BedrockAgentCoreApp(middleware=[Middleware(JsonBodyGuard)])
    registry = TurnRegistry(on_start=app.add_async_task, on_finish=app.complete_async_task)
    service = VoiceService(
        config=config, models=models or model_factory(config), registry=registry,
        connect_tts=connect_tts if connect_tts is not None or not use_config_tts else tts_connector(config),
    )
    app.state.voice = service

    @app.entrypoint
    async def invoke(payload: Any, context: Any) -> AsyncIterator[dict[str, Any]]:
        session_id = getattr(context, "session_id", None)
        try:
            request = parse_request(payload, max_prompt_chars=config.max_prompt_chars, allow_interrupt=True)
        except ProtocolError as exc:
            yield AgentError.of(exc).to_wire()
            return
        if isinstance(request, InterruptRequest):
            found = service.sse_conversation(session_id, create=False)
            if found is None or found.turn is None or not await found.turn.interrupt(heard_ms=request.heard_ms):
                yield AgentError(code="not_running", message="no turn of this session is running").to_wire()
            else:
                yield InterruptSent(turn=found.turn.number, t_ms=found.turn.t_ms()).to_wire()
            return
        conversation = service.sse_conversation(session_id)
        assert conversation is not None
        if conversation.busy:
            yield AgentError(
                code="busy", message="a turn of this session is running; send {\"type\": \"interrupt\"} first"
            ).to_wire()
            return
        async for item in conversation.start(request).events():
            yield sse_item(item)

    @app.websocket
    async def websocket(ws: WebSocket, context: Any) -> None:
        await ws.accept()
        await _serve_socket(ws, service)

    if config.serve_page:
        web = resources.files("voice_agent") / "web"

        async def page(request: Request) -> Response:
            name = request.path_params.get("name", "index.html")
            kinds = {"index.html": "text/html", "app.js": "text/javascript"}
            if name not in kinds:
                return Response("not found", status_code=404, media_type="text/plain")
            return Response((web / name).read_bytes(), media_type=kinds[name], headers={"Cache-Control": "no-store"})

        app.add_route("/", page, methods=["GET"])
        app.add_route("/web/{name}", page, methods=["GET"])
    return app


STALLED_CLOSE_CODE = CloseCode.STALLED  # as the TTS server: the client stopped reading


async def _serve_socket(ws: WebSocket, service: VoiceService) -> None:
    """Read messages until the client leaves; one turn at a time runs beside the reader."""
    conversation = service.new_conversation()
    send_lock = asyncio.Lock()
    runner: asyncio.Task[None] | None = None

    async def send(item: TurnItem) -> None:
        async with send_lock:
            sending = ws.send_bytes(item.data) if isinstance(item, Audio) else ws.send_text(item.to_json())
            await asyncio.wait_for(sending, service.config.send_timeout_s)

    async def run(turn: Turn, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:  # an interrupted turn still winding down: let it finish first
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await previous
        try:
            async for item in turn.events():
                await send(item)
        except asyncio.TimeoutError:  # the client stopped reading: drop it (events() cleans up)
            log.warning("websocket client read nothing for %.0f s: closing", service.config.send_timeout_s)
            with contextlib.suppress(Exception):  # the close frame waits for buffer space too
                await asyncio.wait_for(ws.close(code=STALLED_CLOSE_CODE), max(5.0, service.config.send_timeout_s))
        except Exception as exc:  # the client went away mid-turn: events() cleans up on exit
            log.info("websocket turn %d ended early: %s", turn.number, exc)

    await send(service.ready_event(voices=await service.voices()))
    try:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            try:
                request = parse_request(decode_message(_message_data(message)),
                                        max_prompt_chars=service.config.max_prompt_chars, allow_interrupt=True)
            except ProtocolError as exc:
                await send(AgentError.of(exc))
                continue
            current = conversation.turn
            if isinstance(request, InterruptRequest):
                await _interrupt(current, request, send)
                continue
            if current is not None and not current.finished and not current.interrupted:
                await send(AgentError(code="busy", message="a turn is running; send {\"type\": \"interrupt\"} first",
                                      turn=current.number, t_ms=current.t_ms()))
                continue
            runner = asyncio.create_task(run(conversation.start(request), runner))
    except Exception as exc:  # a send on a closed socket, a receive after disconnect
        log.info("websocket closed: %s", exc)
    finally:
        await _wind_down(ws, runner)


def _message_data(message: Message) -> str | bytes:
    """A WebSocket message's text, else its bytes (empty when it carries neither)."""
    raw: str | None = message.get("text")
    if raw is not None:
        return raw
    data: bytes = message.get("bytes") or b""
    return data


async def _interrupt(current: Turn | None, request: InterruptRequest,
                     send: Callable[[TurnItem], Awaitable[None]]) -> None:
    """Stop the running turn, or cut short one whose audio the client is still playing."""
    if current is not None and request.heard_ms is not None and current.cut_short(request.heard_ms):
        await send(Interrupted(turn=current.number, after_end=True, heard_ms=request.heard_ms,
                               t_ms=current.t_ms()))
    elif current is None or not await current.interrupt(heard_ms=request.heard_ms):
        await send(AgentError(code="not_running", message="no turn is running"))


async def _wind_down(ws: WebSocket, runner: asyncio.Task[None] | None) -> None:
    """The client left (or the socket broke): stop the running turn, wait for it, close the socket."""
    if runner is not None and not runner.done():
        runner.cancel()
    if runner is not None:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await runner
    if ws.client_state == WebSocketState.CONNECTED:
        with contextlib.suppress(Exception):
            await ws.close()
