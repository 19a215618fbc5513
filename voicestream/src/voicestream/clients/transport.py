"""What the session needs from a transport: whole frames moved, nothing interpreted.

Kept apart from :class:`~voicestream.clients.base.TtsSession` so a transport (the local WebSocket,
SageMaker's HTTP/2 bidi stream, a test's own) is written against this alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol, runtime_checkable

from voicestream.protocol import SynthesisRequest

Reconnect = Callable[[], Awaitable["FrameTransport"]]  # opens a fresh transport to resume a session on


@runtime_checkable
class FrameTransport(Protocol):
    """Moves whole frames. ``receive`` raises :class:`TtsConnectionError` when the peer is gone."""

    async def send_text(self, data: str) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def receive(self) -> str | bytes: ...

    async def close(self) -> None: ...


class StreamingTts(Protocol):
    """One-shot synthesis (``POST /invocations`` or its SageMaker form): encoded audio bytes out."""

    def stream(self, request: SynthesisRequest) -> AsyncIterator[bytes]: ...
