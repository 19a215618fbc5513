"""One-shot synthesis through a SageMaker endpoint: ``InvokeEndpointWithResponseStream`` (boto3).

boto3 is blocking, so the event stream is read on a worker thread that hands each payload part to
the event loop as it arrives; a bounded number of parts in flight keeps a slow reader from
buffering a whole answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import boto3
import botocore.exceptions
from botocore.config import Config

from voicestream.protocol import SynthesisRequest

from ._sse import SseAudioDecoder
from .errors import TtsConfigError, TtsConnectionError, TtsError, TtsServerError, TtsTimeoutError

_DONE = object()
IN_FLIGHT_PARTS = 32


def map_botocore_error(exc: BaseException, *, endpoint_name: str) -> TtsError:
    """A boto3/botocore failure as the client's typed error, keeping the endpoint's own words."""
    if isinstance(exc, TtsError):
        return exc
    if isinstance(exc, botocore.exceptions.ClientError):
        error: dict[str, Any] = exc.response.get("Error", {})
        code = str(error.get("Code") or "ClientError")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = " ".join(str(error.get("Message") or exc).split())  # one line, whatever the body was
        if message.startswith("<"):  # an HTML error page (a proxy, or no SageMaker there at all)
            message = f"HTTP {status} with an HTML body instead of a SageMaker answer"
        message = message[:500]
        if code == "ModelError":  # the container answered 4xx/5xx: surface its own JSON error
            original = exc.response.get("OriginalMessage")
            original_status = exc.response.get("OriginalStatusCode")
            if isinstance(original, str) and original:
                return TtsServerError.from_body(
                    original, status=original_status if isinstance(original_status, int) else status
                )
        if code == "InternalStreamFailure":
            return TtsConnectionError(f"{endpoint_name}: the response stream failed: {message}")
        if code == "ValidationError" and "not found" in message.lower():
            return TtsServerError("endpoint_not_found", message, status=status)
        return TtsServerError(code, message, status=status if isinstance(status, int) else None)
    if isinstance(exc, (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError)):
        return TtsTimeoutError(f"{endpoint_name}: {exc}")
    if isinstance(exc, (botocore.exceptions.NoCredentialsError, botocore.exceptions.NoRegionError,
                        botocore.exceptions.ProfileNotFound, botocore.exceptions.PartialCredentialsError)):
        return TtsConfigError(str(exc))
    if isinstance(exc, (botocore.exceptions.BotoCoreError, OSError)):
        return TtsConnectionError(f"{endpoint_name}: {exc}")
    return TtsConnectionError(f"{endpoint_name}: {type(exc).__name__}: {exc}")


def payload_parts(events: Iterator[dict[str, Any]], *, endpoint_name: str) -> Iterator[bytes]:
    """The ``PayloadPart.Bytes`` of a response stream; error events raise typed errors."""
    for event in events:
        if "PayloadPart" in event:
            data = event["PayloadPart"].get("Bytes", b"")
            if data:
                yield data
        elif "ModelStreamError" in event:
            err = event["ModelStreamError"]
            raise TtsServerError(str(err.get("ErrorCode") or "ModelStreamError"),
                                 str(err.get("Message") or "model stream error"))
        elif "InternalStreamFailure" in event:
            message = event["InternalStreamFailure"].get("Message") or "internal stream failure"
            raise TtsConnectionError(f"{endpoint_name}: the response stream failed: {message}")


class SageMakerStreamingTts:
    """:class:`~voicestream.clients.base.StreamingTts` over ``InvokeEndpointWithResponseStream``."""

    def __init__(
        self,
        *,
        endpoint_name: str,
        session: boto3.Session | None = None,
        region: str | None = None,
        client: Any | None = None,
        target_variant: str | None = None,
        read_timeout: float = 120.0,
        connect_timeout: float = 10.0,
        endpoint_url: str | None = None,
    ) -> None:
        """``endpoint_url`` overrides the service URL; without it boto3 reads
        ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` (and ``AWS_CA_BUNDLE``) as it always does."""
        self.endpoint_name = endpoint_name
        self._target_variant = target_variant
        self._client = client
        self._client_factory: Callable[[], Any] = lambda: (session or boto3.Session()).client(
            "sagemaker-runtime", region_name=region, endpoint_url=endpoint_url,
            config=Config(read_timeout=read_timeout, connect_timeout=connect_timeout,
                          retries={"mode": "standard", "max_attempts": 3}),
        )
        self._client_lock = threading.Lock()

    def _sagemaker(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = self._client_factory()
            return self._client

    def _invoke(self, request: SynthesisRequest) -> Any:
        kwargs: dict[str, Any] = {
            "EndpointName": self.endpoint_name,
            "Body": json.dumps(request.to_json()).encode("utf-8"),
            "ContentType": "application/json",
        }
        if self._target_variant:
            kwargs["TargetVariant"] = self._target_variant
        return self._sagemaker().invoke_endpoint_with_response_stream(**kwargs)["Body"]

    async def stream(self, request: SynthesisRequest) -> AsyncIterator[bytes]:
        """Audio bytes as the endpoint streams them (SSE requests are decoded to audio too)."""
        decoder = SseAudioDecoder() if request.transport == "sse" else None
        async for part in self._parts(request):
            if decoder is None:
                yield part
            else:
                for audio in decoder.feed(part):
                    yield audio
        if decoder is not None:
            decoder.finish()

    async def _parts(self, request: SynthesisRequest) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        credits = threading.Semaphore(IN_FLIGHT_PARTS)
        stop = threading.Event()
        body: list[Any] = []

        def post(item: object) -> None:
            if not stop.is_set():
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            try:
                stream = self._invoke(request)
                body.append(stream)
                for part in payload_parts(iter(stream), endpoint_name=self.endpoint_name):
                    while not credits.acquire(timeout=0.2):  # wait for the reader, or for stop
                        if stop.is_set():
                            return
                    post(part)
                    if stop.is_set():
                        return
                post(_DONE)
            except BaseException as exc:  # noqa: BLE001 - every failure goes to the reader
                post(exc if stop.is_set() else map_botocore_error(exc, endpoint_name=self.endpoint_name))

        worker = threading.Thread(target=work, name=f"sagemaker-stream-{self.endpoint_name}", daemon=True)
        worker.start()
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                credits.release()
                assert isinstance(item, bytes)
                yield item
        finally:
            stop.set()
            for stream in body:  # unblock a worker waiting on the network
                try:
                    stream.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass
