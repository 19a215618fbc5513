"""Transports to a server reached directly (the local container, a dev box): WebSocket and HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from voicestream.protocol import SynthesisRequest

from ._sse import SseAudioDecoder
from .base import TtsSession
from .errors import TtsConnectionError, TtsServerError, TtsTimeoutError

BIDI_PATH = "/invocations-bidirectional-stream"
INVOCATIONS_PATH = "/invocations"


def websocket_url(url: str) -> str:
    """``http://h:p`` (a server's base URL) or ``ws://h:p/...`` as the bidi stream's ws URL."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"not an http(s) or ws(s) URL: {url!r}")
    path = parts.path if parts.path not in ("", "/") else BIDI_PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


class WebSocketTransport:
    """Frames over a ``websockets`` client connection."""

    def __init__(self, *, connection: ClientConnection) -> None:
        self._ws = connection

    async def send_text(self, data: str) -> None:
        try:
            await self._ws.send(data, text=True)
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def send_bytes(self, data: bytes) -> None:
        try:
            await self._ws.send(data, text=False)
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def receive(self) -> str | bytes:
        try:
            return await self._ws.recv()
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def close(self) -> None:
        await self._ws.close()


def _closed(exc: ConnectionClosed) -> TtsConnectionError:
    frame = exc.rcvd or exc.sent
    if frame is None:
        return TtsConnectionError("the connection to the TTS server dropped (no close frame)")
    reason = f": {frame.reason}" if frame.reason else ""
    return TtsConnectionError(f"the TTS server connection closed (code {frame.code}{reason})",
                              code=exc.rcvd.code if exc.rcvd is not None else None)


async def connect_local(
    url: str,
    *,
    receive_timeout: float | None = 60.0,
    raise_errors: bool = True,
    open_timeout: float = 10.0,
    resume: bool = True,
    **connect_kwargs: Any,
) -> TtsSession:
    """Open a session with a server at ``url`` (its base URL, or the full ws:// URL).

    ``resume``: when the connection ends without our ``close`` (a server draining on SIGTERM),
    connect again and send what got no answer (TtsSession's ``reconnect``).

    ``connect_kwargs`` go to :func:`websockets.asyncio.client.connect` (e.g. ``additional_headers``).
    """
    target = websocket_url(url)
    connect_kwargs.setdefault("proxy", None)  # a local server: an environment proxy would only hurt
    connect_kwargs.setdefault("max_size", 4 * 1024 * 1024)

    async def open_transport() -> WebSocketTransport:
        try:
            connection = await connect(target, open_timeout=open_timeout, **connect_kwargs)
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as exc:
            raise TtsConnectionError(f"cannot connect to {target}: {exc or type(exc).__name__}") from None
        return WebSocketTransport(connection=connection)

    return TtsSession(
        transport=await open_transport(),
        receive_timeout=receive_timeout,
        raise_errors=raise_errors,
        reconnect=open_transport if resume else None,
    )


class LocalHttpTts:
    """``POST /invocations`` with streamed audio (raw bytes or SSE, decoded to bytes either way)."""

    def __init__(
        self,
        *,
        base_url: str,
        timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        path = parts.path.rstrip("/")
        if not path.endswith(INVOCATIONS_PATH):
            path += INVOCATIONS_PATH
        self.url = urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout), trust_env=False)

    async def __aenter__(self) -> LocalHttpTts:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def stream(self, request: SynthesisRequest) -> AsyncIterator[bytes]:
        """Audio bytes as the server makes them. 4xx bodies raise :class:`TtsServerError`."""
        try:
            async with self._client.stream("POST", self.url, json=request.to_json()) as response:
                if response.status_code >= 400:
                    body = await response.aread()
                    raise TtsServerError.from_body(body, status=response.status_code)
                if request.transport == "sse":
                    decoder = SseAudioDecoder()
                    async for data in response.aiter_raw():
                        for audio in decoder.feed(data):
                            yield audio
                    decoder.finish()
                else:
                    async for data in response.aiter_raw():
                        if data:
                            yield data
        except httpx.TimeoutException as exc:
            raise TtsTimeoutError(f"{self.url}: timed out ({type(exc).__name__})") from None
        except httpx.RemoteProtocolError as exc:
            raise TtsConnectionError(f"{self.url}: the server cut the audio stream ({exc})") from None
        except httpx.TransportError as exc:
            raise TtsConnectionError(f"cannot reach {self.url}: {exc or type(exc).__name__}") from None
