"""Server-Sent Events of ``POST /invocations`` (``transport: "sse"``) turned back into audio bytes.

Shared by every one-shot transport, since SageMaker's response stream can carry SSE too.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import Any

from .errors import TtsProtocolError, TtsServerError


class SseAudioDecoder:
    """Feed raw body bytes in any split; get audio bytes out. An ``error`` event raises."""

    def __init__(self) -> None:
        self._buffer = b""
        self.start: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._buffer += data.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            audio = self._event(block)
            if audio:
                yield audio

    def finish(self) -> None:
        """The body ended: complain if it ended without the ``end`` event (a cut stream)."""
        if self._buffer.strip():
            list(self.feed(b"\n\n"))
        if self.end is None:
            raise TtsProtocolError("the SSE stream ended without an 'end' event")

    def _event(self, block: bytes) -> bytes:
        name = "message"
        data: list[str] = []
        for line in block.decode("utf-8", "replace").split("\n"):
            if line.startswith(":") or not line:
                continue
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
        try:
            payload = json.loads("\n".join(data)) if data else {}
        except ValueError:
            raise TtsProtocolError(f"SSE {name!r} event data is not JSON") from None
        if not isinstance(payload, dict):
            raise TtsProtocolError(f"SSE {name!r} event data is not a JSON object")
        if name == "error":
            raise TtsServerError.from_frame(payload)
        if name == "start":
            self.start = payload
        elif name == "end":
            self.end = payload
        elif name == "audio":
            try:
                return base64.b64decode(str(payload.get("audio", "")), validate=True)
            except (binascii.Error, ValueError):
                raise TtsProtocolError("SSE audio event is not valid base64") from None
        return b""
