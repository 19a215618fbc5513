"""Serve the stand-in over TLS (ALPN h2 and http/1.1) with hypercorn, on a socket bound up front."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypercorn.asyncio import serve
from hypercorn.config import Config

from . import h2_late_data
from .app import SageMakerRuntimeApp
from .settings import StandInSettings
from .tls import TlsFiles, make_tls_files


@dataclass(frozen=True, kw_only=True)
class Listening:
    """What a client needs: the endpoint URL, the endpoint name, the region and the CA to trust."""

    endpoint_url: str
    endpoint_name: str
    region: str
    ca_bundle: Path

    def lines(self) -> list[str]:
        return [f"endpoint_url={self.endpoint_url}", f"endpoint_name={self.endpoint_name}",
                f"region={self.region}", f"ca_bundle={self.ca_bundle}"]


def bind(settings: StandInSettings) -> socket.socket:
    """A listening socket: port 0 picks a free one, and nobody can take it between pick and serve."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def run(*, settings: StandInSettings, state_dir: Path, shutdown: asyncio.Event,
              on_ready: Callable[[Listening], None]) -> None:
    """Serve until ``shutdown`` is set; ``on_ready`` hears the address once the socket listens."""
    h2_late_data.install()
    tls: TlsFiles = make_tls_files(state_dir)
    sock = bind(settings)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.certfile, config.keyfile = str(tls.certfile), str(tls.keyfile)
    config.alpn_protocols = ["h2", "http/1.1"]
    config.keep_alive_timeout = 75.0
    config.accesslog = None
    port = sock.getsockname()[1]
    on_ready(Listening(endpoint_url=f"https://{settings.host}:{port}", endpoint_name=settings.endpoint_name,
                       region=settings.region, ca_bundle=tls.ca_bundle))
    try:
        await serve(SageMakerRuntimeApp(settings=settings), config, shutdown_trigger=shutdown.wait)  # type: ignore[arg-type]
    finally:
        with contextlib.suppress(OSError):  # hypercorn closes the fd it was given
            sock.close()
