"""Small synchronous clients of the agent's two transports, for the tests."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect


@dataclass(kw_only=True)
class TurnLog:
    """What one turn delivered, in arrival order: ``items`` holds event dicts and audio bytes."""

    items: list[dict[str, Any] | bytes] = field(default_factory=list)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [i for i in self.items if isinstance(i, dict)]

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    @property
    def audio(self) -> list[bytes]:
        return [i for i in self.items if isinstance(i, bytes)]

    @property
    def text(self) -> str:
        return "".join(e["text"] for e in self.events if e["type"] == "text")

    @property
    def sentences(self) -> list[str]:
        return [e["text"] for e in self.events if e["type"] == "sentence"]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def index(self, kind: str) -> int:
        """Position in ``items`` of the first event of ``kind``."""
        for i, item in enumerate(self.items):
            if isinstance(item, dict) and item["type"] == kind:
                return i
        raise AssertionError(f"no {kind!r} event in {self.types}")

    def first_audio_index(self) -> int:
        return next(i for i, item in enumerate(self.items) if isinstance(item, bytes))

    @property
    def end(self) -> dict[str, Any]:
        return self.of("end")[-1]


def ws_open(url: str) -> tuple[ClientConnection, dict[str, Any]]:
    """Connect and read the ``ready`` event."""
    ws = connect(url, open_timeout=10, max_size=4 * 1024 * 1024, proxy=None, legacy=True)
    ready = json.loads(ws.recv(timeout=10))
    assert ready["type"] == "ready", ready
    return ws, ready


def ws_read_turn(ws: ClientConnection, *, timeout: float = 60.0, log: TurnLog | None = None) -> TurnLog:
    """Read until the turn's ``end`` event."""
    log = log or TurnLog()
    while True:
        message = ws.recv(timeout=timeout)
        if isinstance(message, bytes):
            log.items.append(message)
            continue
        event = json.loads(message)
        log.items.append(event)
        if event["type"] == "end":
            return log


def ws_read_until_audio(ws: ClientConnection, *, timeout: float = 60.0) -> TurnLog:
    """Read until the first audio frame of the turn has arrived (speech has started)."""
    log = TurnLog()
    while not log.audio:
        message = ws.recv(timeout=timeout)
        log.items.append(message if isinstance(message, bytes) else json.loads(message))
    return log


def ws_turn(ws: ClientConnection, payload: dict[str, Any], *, timeout: float = 60.0) -> TurnLog:
    ws.send(json.dumps(payload))
    return ws_read_turn(ws, timeout=timeout)


def ws_next_event(ws: ClientConnection, *, timeout: float = 10.0) -> dict[str, Any]:
    """The next JSON event, skipping audio frames."""
    while True:
        message = ws.recv(timeout=timeout)
        if isinstance(message, str):
            event: dict[str, Any] = json.loads(message)
            return event


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any] | bytes]:
    """SSE ``data:`` lines as events; ``audio`` events also yield their decoded PCM right after."""
    for line in response.iter_lines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[len("data: "):])
        yield event
        if event.get("type") == "audio":
            yield base64.b64decode(event["audio"])


def sse_turn(base_url: str, payload: Any, *, timeout: float = 60.0, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> TurnLog:
    """POST /invocations and read the whole stream (audio events kept, and their PCM after them)."""
    log = TurnLog()
    body = raw if raw is not None else json.dumps(payload).encode()
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        with client.stream("POST", f"{base_url}/invocations", content=body,
                           headers={"Content-Type": "application/json", **(headers or {})}) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            log.items.extend(sse_events(response))
    return log
