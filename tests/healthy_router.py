"""A loopback TCP router in front of several Kokoro servers, as SageMaker routes an endpoint's traffic:
each new connection goes to the first instance whose ``/ping`` answers 200, so an instance that is
draining (503) or gone gets none. Bytes are relayed unchanged both ways (HTTP, WebSocket, TLS)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import httpx

PING_TIMEOUT_S = 2.0


class HealthyRouter:
    """``url`` routes to ``backends`` (base URLs, ``http://host:port``); ``routed`` counts per backend."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        self.routed = {backend: 0 for backend in backends}
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> HealthyRouter:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for relay in list(self._relays):
            relay.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)

    async def _healthy(self) -> str | None:
        async with httpx.AsyncClient(timeout=PING_TIMEOUT_S, trust_env=False) as http:
            for backend in self.backends:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{backend}/ping")).status_code == 200:
                        return backend
        return None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            backend = await self._healthy()
            if backend is None:
                return  # no healthy instance: the client sees the connection close
            self.routed[backend] += 1
            host, port = backend.removeprefix("http://").rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        except OSError:
            pass
        finally:
            writer.close()
            self._relays.discard(task)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.write_eof()


@contextlib.contextmanager
def router_thread(backends: list[str]) -> Iterator[HealthyRouter]:
    """The router on an event loop of its own thread, for synchronous tests."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="healthy-router", daemon=True)
    thread.start()
    router = HealthyRouter(backends)
    try:
        asyncio.run_coroutine_threadsafe(router.__aenter__(), loop).result(timeout=10)
        yield router
    finally:
        asyncio.run_coroutine_threadsafe(router.__aexit__(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
