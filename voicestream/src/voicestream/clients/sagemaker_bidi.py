"""The bidirectional session through SageMaker: ``InvokeEndpointWithBidirectionalStream``.

Uses ``aws-sdk-sagemaker-runtime-http2==0.12.0`` (its API changed between 0.7 and 0.8; imported
only here). SageMaker relays each request payload part to the container's WebSocket as a text
frame when its DataType is UTF8 and as a binary frame otherwise, and marks response parts the same
way, so the transport maps text frames to UTF8 parts and back. Credentials come from boto3's
default chain and are re-read on every resolution, so refreshed (assumed-role, SSO) credentials
are picked up. The endpoint URL can be overridden (argument, or ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``
/ ``AWS_ENDPOINT_URL`` as boto3 reads them) and ``AWS_CA_BUNDLE`` is honoured, which is how the
local stand-in (``make sagemaker-local``) is reached; connecting waits for the endpoint's answer, so
an unreachable endpoint or refused credentials fail at connect, not at the first message.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

import boto3
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InternalStreamFailure,
    InvokeEndpointWithBidirectionalStreamInput,
    ModelError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
)
from smithy_aws_core.identity import AWSCredentialsIdentity, AWSIdentityProperties
from smithy_core.exceptions import CallError

from ._sdk_streams import DuplexStream, OutputStream, abandon, close_owned
from .base import TtsSession
from .errors import TtsConfigError, TtsConnectionError, TtsError, TtsServerError, TtsTimeoutError

log = logging.getLogger(__name__)

BIDI_PORT = 8443
_CONTROL_PREFIX = b'{"type"'  # a control frame, when the endpoint left DataType unset
CONNECT_TIMEOUT_S = 10.0
CLOSE_DRAIN_S = 2.0
INBOX_FRAMES = 64  # frames read ahead of the caller (a few seconds of audio at most)
# What AWS answers when it refuses the caller's credentials or signature.
_AUTH_ERRORS = frozenset({
    "InvalidSignatureException", "UnrecognizedClientException", "IncompleteSignatureException",
    "MissingAuthenticationTokenException", "ExpiredTokenException", "AccessDeniedException",
    "InvalidClientTokenId", "SignatureDoesNotMatch",
})


def endpoint_uri(region: str) -> str:
    """SageMaker's HTTP/2 runtime: the bidi stream is served on port 8443."""
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{BIDI_PORT}"


def configured_endpoint_url(environ: dict[str, str] | None = None) -> str | None:
    """The endpoint URL boto3 would take from the environment for sagemaker-runtime, if any."""
    env = os.environ if environ is None else environ
    if env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    return env.get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME") or env.get("AWS_ENDPOINT_URL") or None


def configured_ca_bundle(session: boto3.Session) -> str | None:
    """``AWS_CA_BUNDLE`` or the profile's ``ca_bundle``, as boto3 resolves it."""
    botocore_session = getattr(session, "_session", None)
    value = botocore_session.get_config_variable("ca_bundle") if botocore_session is not None else None
    return value or os.environ.get("AWS_CA_BUNDLE") or None


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


def _unmodeled_code(message: str) -> str | None:
    """The error type of an error the SDK's model lacks: its message ends ``id: namespace#Type``."""
    match = re.search(r"id: [\w.]+#(\w+)", message or "")
    return match.group(1) if match else None


def map_sdk_error(exc: BaseException, *, endpoint_name: str) -> TtsError:
    """An SDK failure as the client's typed error; ModelError keeps the container's own JSON error."""
    if isinstance(exc, TtsError):
        return exc
    if isinstance(exc, ModelError) and exc.original_message:
        return TtsServerError.from_body(exc.original_message, status=exc.original_status_code)
    if isinstance(exc, InternalStreamFailure):  # the SDK's receiver raises stream errors as exceptions
        return TtsConnectionError(f"{endpoint_name}: the response stream failed: {exc.message}")
    if isinstance(exc, CallError):
        code = str(getattr(exc, "error_code", None) or _unmodeled_code(exc.message) or type(exc).__name__)
        status = getattr(getattr(exc, "response_metadata", None), "http_status_code", None)
        if code in _AUTH_ERRORS or status == 403:
            return TtsConfigError(f"{endpoint_name}: the endpoint refused the AWS credentials ({code}, HTTP "
                                  f"{status}); check the access key, secret key, session token and region")
        if getattr(exc, "is_timeout_error", False):
            return TtsTimeoutError(f"{endpoint_name}: {exc.message or type(exc).__name__}")
        return TtsServerError(str(code), exc.message or str(exc))
    return TtsConnectionError(f"{endpoint_name}: {type(exc).__name__}: {exc}")


class SageMakerBidiTransport:
    """Frames over the SDK's duplex event stream: text frames as UTF8 parts, audio as BINARY.

    One reader task owns the SDK's response stream and hands whole frames to :meth:`receive`
    through a small queue. awscrt cannot take back a receive once asked: cancelling a pending
    receive (a caller that stops reading mid-turn, a receive timeout) raises ``InvalidStateError:
    CANCELLED`` inside awscrt and leaves the connection's event stream out of step (the next
    message fails its checksum). So a caller's receive waits on the queue, which is safe to
    cancel, and the SDK's receive is left running until the stream ends or :meth:`close` gives
    up on it. The queue is bounded: a caller that stops reading stops the reader, and HTTP/2's
    flow control holds the rest at the endpoint.
    """

    def __init__(
        self,
        *,
        stream: DuplexStream,
        endpoint_name: str,
        on_close: Callable[[], Awaitable[None]] | None = None,
        output: OutputStream | None = None,
    ) -> None:
        self._stream = stream
        self._endpoint = endpoint_name
        self._on_close = on_close
        self._output: OutputStream | None = output
        self._text = b""  # a UTF8 message split into PARTIAL parts
        self._closed = False
        self._inbox: asyncio.Queue[str | bytes | TtsError] = asyncio.Queue(INBOX_FRAMES)
        self._ended: TtsError | None = None  # why the stream ended, once the reader saw it end
        self._reader: asyncio.Task[None] | None = None

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
        """The next frame; TtsConnectionError (or the endpoint's error) once the stream has ended.
        Cancelling a waiting receive loses nothing and leaves the stream usable."""
        if self._ended is not None and self._inbox.empty():
            raise self._ended
        if self._reader is None and not self._closed:
            self._reader = asyncio.create_task(self._read(), name=f"sagemaker-bidi-reader-{self._endpoint}")
        item = await self._inbox.get()
        if isinstance(item, TtsError):
            raise item
        return item

    async def _read(self) -> None:
        """The reader: every frame into the inbox, then what ended the stream (the end marker)."""
        ended: TtsError = TtsConnectionError(f"{self._endpoint}: the connection is closed")
        try:
            if self._output is None:
                _, self._output = await self._stream.await_output()
            while True:
                frame = self._frame(await self._output.receive())
                if frame is not None and not self._closed:
                    await self._inbox.put(frame)
        except asyncio.CancelledError:
            pass  # close() gave up waiting for the endpoint: the stream is being dropped
        except Exception as exc:  # noqa: BLE001 - every end of the stream is the consumer's to see
            ended = map_sdk_error(exc, endpoint_name=self._endpoint)
        finally:
            self._end(ended)

    def _end(self, reason: TtsError) -> None:
        """Mark the stream ended and wake a waiting receive, whatever the queue holds."""
        self._ended = reason
        if self._closed:  # nobody reads a closed transport's frames: the marker must fit
            while not self._inbox.empty():
                self._inbox.get_nowait()
        with contextlib.suppress(asyncio.QueueFull):
            self._inbox.put_nowait(reason)

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
        """End our side, let the endpoint end its side (the reader sees the end), then drop the
        connection; frames still unread are dropped."""
        if self._closed:
            return
        self._closed = True
        while not self._inbox.empty():  # frees a reader waiting to put a frame nobody will read
            self._inbox.get_nowait()
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stream.input_stream.close(), timeout=5.0)
            reader = self._reader
            if reader is None and self._output is not None and self._ended is None:
                reader = self._reader = asyncio.create_task(self._read())  # reads to the endpoint's end
            if reader is not None:
                # the endpoint ends its side once ours has ended; past the wait, the stream is dropped
                await asyncio.wait({reader}, timeout=CLOSE_DRAIN_S)
                if not reader.done():
                    reader.cancel()
                    await asyncio.wait({reader}, timeout=1.0)
            if self._output is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._output.close(), timeout=5.0)
        finally:
            self._end(TtsConnectionError(f"{self._endpoint}: the connection is closed"))
            if self._on_close is not None:
                with contextlib.suppress(Exception):
                    await self._on_close()


def _http2_transport(*, ca_bundle: str | None, connect_timeout: float, writers: set[asyncio.Task[Any]]) -> Any:
    """The SDK's CRT HTTP/2 client, adding to ``writers`` the request-body task of each stream it opens."""
    try:
        from ._crt import WriterTrackingCRTClient
    except ImportError:
        raise TtsConfigError(
            "the SageMaker bidirectional stream needs HTTP/2 from awscrt: "
            "pip install 'aws-sdk-sagemaker-runtime-http2[awscrt]==0.12.0'"
        ) from None
    return WriterTrackingCRTClient(ca_bundle=ca_bundle, connect_timeout_s=connect_timeout, writers=writers)


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
    endpoint_url: str | None = None,
    ca_bundle: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    resume: bool = True,
) -> TtsSession:
    """Open a session with the endpoint's container over SageMaker's HTTP/2 bidirectional stream.

    ``resume``: when the stream ends without our ``close`` (an instance draining on SIGTERM during
    an update or scale-in ends it), open another and send what got no answer (TtsSession's
    ``reconnect``); SageMaker routes the new stream to a healthy instance.

    Returns once the endpoint answered the request, so a wrong URL, a refused signature or an
    unknown endpoint raise here. ``endpoint_url`` / ``ca_bundle`` default to the environment's
    (``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``, ``AWS_CA_BUNDLE``). ``client`` replaces the SDK client
    (anything with ``invoke_endpoint_with_bidirectional_stream``).
    """
    if client is None:
        session = boto_session or boto3.Session()
        region = region or session.region_name
        if not region:
            raise TtsConfigError("no AWS region: pass --region or set AWS_REGION / the profile's region")
        url = endpoint_url or configured_endpoint_url() or endpoint_uri(region)
        if not url.startswith("https://"):
            raise TtsConfigError(f"endpoint_url: {url!r} must be https:// (the SDK speaks HTTP/2 only over TLS)")
        ca = ca_bundle or configured_ca_bundle(session)
    request = InvokeEndpointWithBidirectionalStreamInput(
        endpoint_name=endpoint_name, target_variant=target_variant, model_invocation_path=model_invocation_path
    )

    async def open_transport() -> SageMakerBidiTransport:
        """One stream; with no ``client`` given, on a client (and HTTP/2 connection) of its own,
        closed with the stream."""
        owned: AsyncSageMakerRuntimeHTTP2Client | None = None
        writers: set[asyncio.Task[Any]] = set()
        invoker = client
        if invoker is None:
            config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
                region=region,
                endpoint_uri=url,
                aws_credentials_identity_resolver=BotoCredentialsResolver(session=session),
                transport=_http2_transport(ca_bundle=ca, connect_timeout=connect_timeout, writers=writers),
            )
            invoker = owned = AsyncSageMakerRuntimeHTTP2Client(config=config)
        stream: DuplexStream | None = None
        try:
            stream = await invoker.invoke_endpoint_with_bidirectional_stream(request)
            _, output = await asyncio.wait_for(stream.await_output(), timeout=connect_timeout)
        except Exception as exc:
            await abandon(stream, owned, writers)
            if isinstance(exc, TimeoutError):
                raise TtsTimeoutError(
                    f"{endpoint_name}: no answer within {connect_timeout:.0f} s of connecting"
                ) from exc
            raise map_sdk_error(exc, endpoint_name=endpoint_name) from exc
        on_close = functools.partial(close_owned, owned, writers) if owned is not None else None
        return SageMakerBidiTransport(stream=stream, endpoint_name=endpoint_name, on_close=on_close, output=output)

    return TtsSession(transport=await open_transport(), receive_timeout=receive_timeout, raise_errors=raise_errors,
                      reconnect=open_transport if resume else None)
