"""The bidirectional session through SageMaker: ``InvokeEndpointWithBidirectionalStream``.

Uses ``aws-sdk-sagemaker-runtime-http2==0.12.0`` (its API changed between 0.7 and 0.8; imported
only here). SageMaker relays each request payload part to the container's WebSocket as a text
frame when its DataType is UTF8 and as a binary frame otherwise, and marks response parts the same
way, so the transport maps text frames to UTF8 parts and back. Credentials come from boto3's
default chain and are re-read on every resolution, so refreshed (assumed-role, SSO) credentials
are picked up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import boto3
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InternalStreamFailure, InvokeEndpointWithBidirectionalStreamInput, ModelError, RequestPayloadPart,
    RequestStreamEventPayloadPart, ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError, ResponseStreamEventPayloadPart,
)
from smithy_aws_core.identity import AWSCredentialsIdentity, AWSIdentityProperties
from smithy_core.exceptions import CallError

from .base import TtsSession
from .errors import TtsConfigError, TtsConnectionError, TtsError, TtsServerError, TtsTimeoutError

log = logging.getLogger(__name__)

BIDI_PORT = 8443
_CONTROL_PREFIX = b'{"type"'  # a control frame, when the endpoint left DataType unset


def endpoint_uri(region: str) -> str:
    """SageMaker's HTTP/2 runtime: the bidi stream is served on port 8443."""
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{BIDI_PORT}"


class BotoCredentialsResolver:
    """The SDK's identity resolver, asking boto3 each time so refreshable credentials stay fresh."""

    def __init__(self, *, session: boto3.Session) -> None:
        self._session = session

    def _frozen(self) -> AWSCredentialsIdentity:
        credentials = self._session.get_credentials()
        if credentials is None:
            raise TtsConfigError("no AWS credentials found (boto3's default chain came up empty)")
        frozen = credentials.get_frozen_credentials()  # refreshes RefreshableCredentials if due
        return AWSCredentialsIdentity(
            access_key_id=frozen.access_key, secret_access_key=frozen.secret_key, session_token=frozen.token
        )

    async def get_identity(self, *, properties: AWSIdentityProperties) -> AWSCredentialsIdentity:
        return await asyncio.to_thread(self._frozen)  # a refresh may call STS/SSO: keep it off the loop

    async def invalidate(self) -> None:
        """Nothing cached here: boto3 owns the cache and its refresh."""


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


def map_sdk_error(exc: BaseException, *, endpoint_name: str) -> TtsError:
    """An SDK failure as the client's typed error; ModelError keeps the container's own JSON error."""
    if isinstance(exc, TtsError):
        return exc
    if isinstance(exc, ModelError) and exc.original_message:
        return TtsServerError.from_body(exc.original_message, status=exc.original_status_code)
    if isinstance(exc, InternalStreamFailure):  # the SDK's receiver raises stream errors as exceptions
        return TtsConnectionError(f"{endpoint_name}: the response stream failed: {exc.message}")
    if isinstance(exc, CallError):
        if getattr(exc, "is_timeout_error", False):
            return TtsTimeoutError(f"{endpoint_name}: {exc.message or type(exc).__name__}")
        code = getattr(exc, "error_code", None) or type(exc).__name__
        return TtsServerError(str(code), exc.message or str(exc))
    return TtsConnectionError(f"{endpoint_name}: {type(exc).__name__}: {exc}")


class SageMakerBidiTransport:
    """Frames over the SDK's duplex event stream: text frames as UTF8 parts, audio as BINARY."""

    def __init__(
        self,
        *,
        stream: DuplexStream,
        endpoint_name: str,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._stream = stream
        self._endpoint = endpoint_name
        self._on_close = on_close
        self._output: OutputStream | None = None
        self._text = b""  # a UTF8 message split into PARTIAL parts
        self._closed = False

    async def send_text(self, data: str) -> None:
        await self._send(data.encode("utf-8"), "UTF8")

    async def send_bytes(self, data: bytes) -> None:
        await self._send(data, "BINARY")

    async def _send(self, payload: bytes, data_type: str) -> None:
        event = RequestStreamEventPayloadPart(value=RequestPayloadPart(bytes_=payload, data_type=data_type))
        try:
            await self._stream.input_stream.send(event)
        except Exception as exc:
            raise map_sdk_error(exc, endpoint_name=self._endpoint) from exc

    async def receive(self) -> str | bytes:
        try:
            if self._output is None:
                _, self._output = await self._stream.await_output()
            while True:
                event = await self._output.receive()
                frame = self._frame(event)
                if frame is not None:
                    return frame
        except Exception as exc:
            raise map_sdk_error(exc, endpoint_name=self._endpoint) from exc

    def _frame(self, event: Any) -> str | bytes | None:
        """One response event as a frame; None when it completes nothing yet."""
        if event is None:
            raise TtsConnectionError(f"{self._endpoint}: the endpoint closed the stream")
        if isinstance(event, ResponseStreamEventPayloadPart):
            part = event.value
            data = part.bytes_ or b""
            is_text = part.data_type == "UTF8" or (
                part.data_type is None and (self._text or data.startswith(_CONTROL_PREFIX))
            )
            if not is_text:
                return data or None
            self._text += data
            if part.completion_state == "PARTIAL":
                return None
            text, self._text = self._text, b""
            return text.decode("utf-8", "replace")
        if isinstance(event, ResponseStreamEventModelStreamError):
            err = event.value
            raise TtsServerError(err.error_code or "ModelStreamError", err.message or "model stream error")
        if isinstance(event, ResponseStreamEventInternalStreamFailure):
            raise TtsConnectionError(f"{self._endpoint}: the response stream failed: {event.value.message}")
        log.debug("ignoring an unknown response event %r", event)
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stream.input_stream.close(), timeout=5.0)
            if self._output is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._output.close(), timeout=5.0)
        finally:
            if self._on_close is not None:
                with contextlib.suppress(Exception):
                    await self._on_close()


def _http2_transport() -> Any:
    try:
        from smithy_http.aio.crt import AWSCRTHTTPClient
    except ImportError:
        raise TtsConfigError(
            "the SageMaker bidirectional stream needs HTTP/2 from awscrt: "
            "pip install 'aws-sdk-sagemaker-runtime-http2[awscrt]==0.12.0'"
        ) from None
    return AWSCRTHTTPClient()


async def connect_sagemaker(
    endpoint_name: str,
    *,
    region: str | None = None,
    boto_session: boto3.Session | None = None,
    target_variant: str | None = None,
    model_invocation_path: str | None = None,
    receive_timeout: float | None = 60.0,
    raise_errors: bool = True,
    client: Any | None = None,
) -> TtsSession:
    """Open a session with the endpoint's container over SageMaker's HTTP/2 bidirectional stream.

    ``client`` replaces the SDK client (anything with ``invoke_endpoint_with_bidirectional_stream``).
    """
    owned: AsyncSageMakerRuntimeHTTP2Client | None = None
    if client is None:
        session = boto_session or boto3.Session()
        region = region or session.region_name
        if not region:
            raise TtsConfigError("no AWS region: pass --region or set AWS_REGION / the profile's region")
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
            region=region,
            endpoint_uri=endpoint_uri(region),
            aws_credentials_identity_resolver=BotoCredentialsResolver(session=session),
            transport=_http2_transport(),
        )
        client = owned = AsyncSageMakerRuntimeHTTP2Client(config=config)
    request = InvokeEndpointWithBidirectionalStreamInput(
        endpoint_name=endpoint_name, target_variant=target_variant, model_invocation_path=model_invocation_path
    )
    try:
        stream = await client.invoke_endpoint_with_bidirectional_stream(request)
    except Exception as exc:
        if owned is not None:
            with contextlib.suppress(Exception):
                await owned.close()
        raise map_sdk_error(exc, endpoint_name=endpoint_name) from exc
    transport = SageMakerBidiTransport(
        stream=stream, endpoint_name=endpoint_name, on_close=owned.close if owned is not None else None
    )
    return TtsSession(transport=transport, receive_timeout=receive_timeout, raise_errors=raise_errors)
