"""A bare client written from docs/protocol.md alone: raw websockets, JSON in, frames out."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import websockets

Event = dict[str, Any]  # control frames as sent; audio as {"type": "audio", "bytes": n, "data": b}


async def send(ws: Any, message: dict[str, Any], *, binary: bool = False) -> None:
    text = json.dumps(message)
    await ws.send(text.encode() if binary else text)


async def receive(ws: Any, *, timeout: float = 60) -> Event:
    frame = await asyncio.wait_for(ws.recv(), timeout)
    if isinstance(frame, bytes):
        return {"type": "audio", "bytes": len(frame), "data": frame}
    event: Event = json.loads(frame)
    return event


async def collect(
    ws: Any, until: Callable[[Event], bool], *, timeout: float = 120, log: list[Event] | None = None
) -> list[Event]:
    """Receive events until ``until(event)`` is true (included); bounded by ``timeout``."""
    events: list[Event] = []

    async def run() -> None:
        while True:
            event = await receive(ws, timeout=timeout)
            events.append(event)
            if log is not None:
                log.append(event)
            if until(event):
                return

    await asyncio.wait_for(run(), timeout)
    return events


def of_type(kind: str, **fields: Any) -> Callable[[Event], bool]:
    return lambda e: e.get("type") == kind and all(e.get(k) == v for k, v in fields.items())


def audio_bytes(events: list[Event]) -> bytes:
    return b"".join(e["data"] for e in events if e["type"] == "audio")


def connect(url: str) -> Any:
    return websockets.connect(url, max_size=None, open_timeout=10)


def sse_events(body: str) -> list[tuple[str, dict[str, Any]]]:
    """A whole Server-Sent Events body (POST with ``transport: sse``) as (event, data) pairs."""
    events = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events
