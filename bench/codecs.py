"""Per-codec measurements: bitrate and the time an encoder adds before the first byte."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from .measure import RUN_TIMEOUT_S, BenchError, Target, _post_audio, now


def _sse_events(buffer: bytearray) -> list[tuple[str, dict[str, Any]]]:
    """Pop complete ``event:/data:`` blocks off ``buffer``."""
    events: list[tuple[str, dict[str, Any]]] = []
    while True:
        buffer[:] = buffer.replace(b"\r\n", b"\n")
        end = buffer.find(b"\n\n")
        if end < 0:
            return events
        block = bytes(buffer[:end]).decode()
        del buffer[: end + 2]
        name, data = "message", ""
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
        events.append((name, json.loads(data) if data else {}))


async def codec_binary(client: httpx.AsyncClient, target: Target, text: str, fmt: str) -> dict[str, float]:
    """Binary POST: first body byte after the request left, total bytes."""
    began = now()
    stamps: list[float] = []
    size = 0

    def on_data(t: float, n: int) -> None:
        nonlocal size
        stamps.append(t)
        size += n

    await asyncio.wait_for(_post_audio(client, target, {"text": text, "format": fmt, "transport": "binary"},
                                       on_data), RUN_TIMEOUT_S)
    if not stamps:
        raise BenchError(f"{fmt}: no audio bytes")
    return {"first_byte_ms": (stamps[0] - began) * 1000, "bytes": float(size)}


async def codec_sse(client: httpx.AsyncClient, target: Target, text: str, fmt: str) -> dict[str, float]:
    """SSE POST: first `audio` event after the request left, and the `end` event's audio_ms and
    synthesis_ms (model time), so the first byte can be read with the model's time taken out."""
    began = now()
    first: float | None = None
    end: dict[str, Any] | None = None
    buffer = bytearray()

    async def go() -> None:
        nonlocal first, end
        body = {"text": text, "format": fmt, "transport": "sse"}
        async with client.stream("POST", target.invocations, json=body) as response:
            if response.status_code != 200:
                raise BenchError(f"POST /invocations (sse, {fmt}): {response.status_code}")
            async for data in response.aiter_raw():
                buffer.extend(data)
                for name, payload in _sse_events(buffer):
                    if name == "audio" and first is None:
                        first = now()
                    elif name == "end":
                        end = payload
                    elif name == "error":
                        raise BenchError(f"sse error ({fmt}): {payload}")

    await asyncio.wait_for(go(), RUN_TIMEOUT_S)
    if first is None or end is None:
        raise BenchError(f"{fmt}: the SSE stream had no audio or no end event")
    first_ms = (first - began) * 1000
    before_audio = float(end.get("first_audio_synthesis_ms", end["synthesis_ms"]))  # windows: the first one's
    return {"first_audio_ms": first_ms, "audio_ms": float(end["audio_ms"]),
            "synthesis_ms": float(end["synthesis_ms"]), "chunks": float(end.get("chunks", 0)),
            "first_minus_model_ms": first_ms - before_audio}
