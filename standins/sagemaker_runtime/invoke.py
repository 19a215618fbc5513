"""InvokeEndpoint and InvokeEndpointWithResponseStream, relayed to the container's ``POST /invocations``.

What SageMaker documents: the body and ``Content-Type`` / ``Accept`` go to the container as they
are; a container answer outside 2xx becomes a 424 ``ModelError`` carrying ``OriginalStatusCode``
and ``OriginalMessage``; a streamed answer arrives as ``PayloadPart`` events, and a failure while
streaming as a ``ModelStreamError`` event. The exact wording of messages is ours.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from .wire import EVENT_STREAM, error_body, model_stream_error, payload_part

Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024  # InvokeEndpoint's documented request limit (6 MB)
CONTAINER_TIMEOUT_S = 60.0  # SageMaker gives the container 60 s to answer /invocations
_FORWARDED = ("content-type", "accept", "x-amzn-sagemaker-custom-attributes")


async def _error(send: Send, status: int, code: str, message: str, **extra: Any) -> None:
    headers, body = error_body(code, message, ErrorCode=code, **extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class InvokeRelay:
    """Both one-shot operations, over one pooled HTTP client to the container."""

    def __init__(self, *, container_url: str, variant: str) -> None:
        self._client = httpx.AsyncClient(base_url=container_url, timeout=httpx.Timeout(CONTAINER_TIMEOUT_S))
        self._variant = variant

    async def aclose(self) -> None:
        await self._client.aclose()

    def _request(self, headers: list[tuple[str, str]], body: bytes) -> httpx.Request:
        forwarded = {k: v for k, v in headers if k.lower() in _FORWARDED}
        return self._client.build_request("POST", "/invocations", content=body, headers=forwarded)

    async def _model_error(self, send: Send, response: httpx.Response) -> None:
        original = (await response.aread()).decode("utf-8", "replace")
        kind = "client" if response.status_code < 500 else "server"
        await _error(send, 424, "ModelError",
                     f"Received {kind} error ({response.status_code}) from primary with message \"{original}\".",
                     OriginalStatusCode=response.status_code, OriginalMessage=original)

    async def invoke(self, send: Send, headers: list[tuple[str, str]], body: bytes) -> None:
        if len(body) > MAX_PAYLOAD_BYTES:
            await _error(send, 413, "ValidationError", f"Request body is over {MAX_PAYLOAD_BYTES} bytes")
            return
        try:
            response = await self._client.send(self._request(headers, body))
        except httpx.HTTPError as exc:
            await _error(send, 424, "ModelError", f"the container did not answer: {type(exc).__name__}: {exc}")
            return
        if not response.is_success:
            await self._model_error(send, response)
            return
        content_type = response.headers.get("content-type", "application/octet-stream")
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", content_type.encode()), (b"content-length", str(len(response.content)).encode()),
            (b"x-amzn-invoked-production-variant", self._variant.encode())]})
        await send({"type": "http.response.body", "body": response.content})

    async def invoke_stream(self, send: Send, headers: list[tuple[str, str]], body: bytes) -> None:
        if len(body) > MAX_PAYLOAD_BYTES:
            await _error(send, 413, "ValidationError", f"Request body is over {MAX_PAYLOAD_BYTES} bytes")
            return
        try:
            response = await self._client.send(self._request(headers, body), stream=True)
        except httpx.HTTPError as exc:
            await _error(send, 424, "ModelError", f"the container did not answer: {type(exc).__name__}: {exc}")
            return
        try:
            if not response.is_success:
                await self._model_error(send, response)
                return
            content_type = response.headers.get("content-type", "application/octet-stream")
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", EVENT_STREAM.encode()),
                (b"x-amzn-sagemaker-content-type", content_type.encode()),
                (b"x-amzn-invoked-production-variant", self._variant.encode())]})
            try:
                async for chunk in response.aiter_raw():
                    if chunk:
                        await send({"type": "http.response.body", "body": payload_part(chunk), "more_body": True})
            except httpx.HTTPError as exc:
                broke = f"the container's response stream broke: {type(exc).__name__}: {exc}"
                await send({"type": "http.response.body", "more_body": True,
                            "body": model_stream_error(broke, error_code="ModelStreamError")})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()
