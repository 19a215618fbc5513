"""Ending the SDK's bidirectional streams and our own clients without leaving tasks nobody awaits."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
    from aws_sdk_sagemaker_runtime_http2.models import RequestStreamEventPayloadPart


class InputStream(Protocol):
    async def send(self, event: RequestStreamEventPayloadPart) -> None: ...

    async def close(self) -> None: ...


class OutputStream(Protocol):
    async def receive(self) -> Any: ...

    async def close(self) -> None: ...


class DuplexStream(Protocol):
    """What ``invoke_endpoint_with_bidirectional_stream`` returns (smithy's DuplexEventStream)."""

    input_stream: InputStream

    async def await_output(self) -> tuple[Any, OutputStream]: ...

    async def close(self) -> None: ...



async def reap_writers(writers: set[asyncio.Task[Any]]) -> None:
    """End the SDK's request-body tasks and take their outcome (an error once the stream is over)."""
    tasks, pending = list(writers), [task for task in writers if not task.done()]
    writers.clear()
    for task in pending:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2.0)
    for task in tasks:
        if not task.done():
            task.add_done_callback(_retrieve)
        elif not task.cancelled():
            task.exception()  # retrieved: the error that matters was raised by the call itself


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def close_owned(owned: AsyncSageMakerRuntimeHTTP2Client, writers: set[asyncio.Task[Any]]) -> None:
    """Close our own client's connections, then end its streams' body tasks (a closed stream fails them at once)."""
    try:
        with contextlib.suppress(Exception):
            await owned.close()
    finally:
        await reap_writers(writers)


async def abandon(stream: DuplexStream | None, owned: AsyncSageMakerRuntimeHTTP2Client | None,
                   writers: set[asyncio.Task[Any]]) -> None:
    """Drop a stream that never opened: our own client's connections, or the given client's stream."""
    if owned is not None:
        await close_owned(owned, writers)
        return
    if stream is None:
        return
    try:
        await asyncio.wait_for(stream.close(), timeout=2.0)
    except asyncio.CancelledError:  # its output future was cancelled by the connect timeout
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
    except Exception:  # noqa: BLE001 - the connect error is the one worth raising
        pass
