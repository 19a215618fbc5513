"""Server-Sent Events of ``POST /invocations`` (``transport: "sse"``) turned back into audio bytes.

Shared by every one-shot transport, since SageMaker's response stream can carry SSE too.
"""

from __future__ import annotations

from collections.abc import Iterator

from voicestream.protocol import ErrorEvent, ProtocolError, SseAudio, SseEnd, SseStart, parse_sse

from .errors import TtsProtocolError, TtsServerError


class SseAudioDecoder:
    """Feed raw body bytes in any split; get audio bytes out. An ``error`` event raises."""

    def __init__(self) -> None:
        self._buffer = b""
        self.start: SseStart | None = None
        self.end: SseEnd | None = None

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
            event = parse_sse(name, "\n".join(data))
            if isinstance(event, ErrorEvent):
                raise TtsServerError(event.code, event.message, field=event.field, id=event.id)
            if isinstance(event, SseStart):
                self.start = event
            elif isinstance(event, SseEnd):
                self.end = event
            elif isinstance(event, SseAudio):
                return event.data()
        except ProtocolError as exc:
            raise TtsProtocolError(exc.message) from None
        return b""
