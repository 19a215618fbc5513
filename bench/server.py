"""The Kokoro server under test: a subprocess on a free loopback port, and waits on its /ping.

Every wait is bounded so a wedged server fails the benchmark instead of hanging it.
"""

from __future__ import annotations

import asyncio
import os
import urllib.error
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from voicestream.launch import KokoroProcess, LaunchError

from .measure import BenchError, now

VARIANTS_ENV = "KOKORO_BENCH_VARIANTS"  # bench/variants.py's ENV (that module imports the server)

QUIESCE_TIMEOUT_S = 60.0
START_TIMEOUT_S = 240.0


REPO = Path(__file__).resolve().parents[1]


class ServerProcess(KokoroProcess):
    """``python -m kokoro_server serve`` from the Kokoro environment (voicestream.launch), whose
    failures fail the benchmark. ``variants``: comparison variants (bench/variants.py), served by
    ``bench.variant_server`` around the same server."""

    def __init__(self, *, variants: Iterable[str] = (), **options: Any) -> None:
        names = ",".join(variants)
        if names:
            env = dict(options.pop("env", None) or {})
            path = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))]))
            options["env"] = {**env, VARIANTS_ENV: names, "PYTHONPATH": path}
            options["module"] = "bench.variant_server"
        super().__init__(**options)

    def start(self, *, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """Spawn the server; its first /diagnostics (the decoder pace it measured at warm-up among them)."""
        try:
            status = super().start(timeout_s=timeout_s)
        except LaunchError as error:
            raise BenchError(str(error)) from None
        try:
            return self.diagnostics()
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
            return status  # a tree from before /diagnostics (bench.paired's before/after runs): /ping had them


async def ping(client: httpx.AsyncClient, base_url: str) -> dict[str, Any]:
    """The server's /diagnostics: /ping's state and the decoder pace it sizes windows by."""
    response = await client.get(f"{base_url}/diagnostics", timeout=5.0)
    response.raise_for_status()
    return dict(response.json())


async def quiesce(client: httpx.AsyncClient, base_url: str, *, timeout_s: float = QUIESCE_TIMEOUT_S) -> bool:
    """Wait until the server has no session and no model job, so runs do not overlap. False if
    it is still busy after ``timeout_s`` (the caller records it)."""
    deadline = now() + timeout_s
    while now() < deadline:
        state = await ping(client, base_url)
        if not state.get("sessions") and not state.get("queued") and not state.get("running"):
            return True
        await asyncio.sleep(0.05)
    return False


# --------------------------------------------------------------------------------------------
# One scenario run
