"""The SageMaker transports at their seam, with the SDKs' own types, codecs and parsers.

Nothing here reaches AWS (it cannot, offline). The bidi transport talks to a simulated endpoint
through the SDK's real DuplexEventStream, AWSEventPublisher and AWSEventReceiver over in-memory
pipes, so every frame is encoded and decoded as AWS event-stream messages by the SDK itself. The
response-stream client runs a real botocore client whose HTTP layer is replaced (``before-send``)
by responses carrying encoded event-stream bodies, so botocore's own EventStream parsing runs.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import boto3
import botocore.credentials
import botocore.session
import pytest
import urllib3
from aws_sdk_sagemaker_runtime_http2.models import (
    InternalStreamFailure,
    InvokeEndpointWithBidirectionalStreamInput,
    InvokeEndpointWithBidirectionalStreamOutput,
    ModelStreamError,
    ResponsePayloadPart,
    ResponseStreamEventInternalStreamFailure,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
    _ResponseStreamEventDeserializer,
)
from botocore.awsrequest import AWSResponse
from smithy_aws_event_stream._private.serializers import EventSerializer
from smithy_aws_event_stream.aio import AWSEventPublisher, AWSEventReceiver
from smithy_aws_event_stream.events import Event, EventMessage
from smithy_core.aio.eventstream import DuplexEventStream
from smithy_json import JSONCodec

from voicestream.clients import (
    AudioChunk,
    Configured,
    TtsConfigError,
    TtsConnectionError,
    TtsEvent,
    TtsServerError,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
)
from voicestream.clients.sagemaker import SageMakerStreamingTts
from voicestream.clients.sagemaker_bidi import BotoCredentialsResolver, connect_sagemaker, endpoint_uri
from voicestream.protocol import SynthesisRequest

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 20.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


class Pipe:
    """An in-memory byte pipe: the writer side is the SDK's AsyncWriter, the reader its AsyncByteStream."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._closed = False
        self._changed = asyncio.Condition()

    async def write(self, data: bytes) -> None:
        async with self._changed:
            self._buffer += data
            self._changed.notify_all()

    async def close(self) -> None:
        async with self._changed:
            self._closed = True
            self._changed.notify_all()

    async def read(self, size: int = -1) -> bytes:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._buffer) >= max(size, 1) or self._closed)
            size = len(self._buffer) if size < 0 else min(size, len(self._buffer))
            data = bytes(self._buffer[:size])
            del self._buffer[:size]
            return data


class SimulatedEndpoint:
    """Plays the container behind SageMaker: decodes request events, answers with response events."""

    def __init__(self) -> None:
        self.requests = Pipe()  # client -> endpoint
        self.responses = Pipe()  # endpoint -> client
        self.received: list[tuple[str, str | None, bytes]] = []  # (event type, DataType, payload)
        self.invoked: list[InvokeEndpointWithBidirectionalStreamInput] = []
        self._serializer = EventSerializer(payload_codec=JSONCodec(), is_client_mode=False)  # type: ignore[abstract]
        self._turn = 1
        self.task: asyncio.Task[None] | None = None

    async def invoke_endpoint_with_bidirectional_stream(
        self, input: InvokeEndpointWithBidirectionalStreamInput
    ) -> DuplexEventStream[Any, Any, Any]:
        """Stands in for the SDK client; the stream it returns is the SDK's own class."""
        self.invoked.append(input)
        receiver = AWSEventReceiver(payload_codec=JSONCodec(), source=self.responses,
                                    deserializer=_ResponseStreamEventDeserializer().deserialize)
        output: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        output.set_result((InvokeEndpointWithBidirectionalStreamOutput(), receiver))
        self.task = asyncio.create_task(self._serve())
        return DuplexEventStream(input_stream=AWSEventPublisher(payload_codec=JSONCodec(), async_writer=self.requests),
                                 output_future=output)

    async def _emit(self, event: Any) -> None:
        event.serialize(self._serializer)
        result = self._serializer.get_result()
        assert result is not None
        await self.responses.write(result.encode())

    async def _part(self, data: bytes, data_type: str, completion: str | None = None) -> None:
        await self._emit(ResponseStreamEventPayloadPart(
            value=ResponsePayloadPart(bytes_=data, data_type=data_type, completion_state=completion)))

    async def _text(self, payload: dict[str, Any], *, split: bool = False) -> None:
        data = json.dumps(payload).encode()
        if split:  # one text frame in two parts, as SageMaker may deliver it
            await self._part(data[:7], "UTF8", "PARTIAL")
            await self._part(data[7:], "UTF8", "COMPLETE")
        else:
            await self._part(data, "UTF8")

    async def _serve(self) -> None:
        while (event := await Event.decode_async(self.requests)) is not None:
            headers = event.message.headers
            data_type = headers.get("DataType")
            self.received.append((str(headers.get(":event-type")), data_type if isinstance(data_type, str) else None,
                                  event.message.payload))
            message = json.loads(event.message.payload)
            kind = message.get("type")
            if kind == "configure":
                await self._text({"type": "configured", "voice": message.get("voice", "af_heart"), "speed": 1.0,
                                  "format": "pcm", "sample_rate": 24000, "voices": ["af_heart"], "limits": {}})
            elif kind == "speak" and message["text"] == "model-error":
                await self._emit(ResponseStreamEventModelStreamError(
                    value=ModelStreamError(message="the container crashed", error_code="ModelCrashed")))
            elif kind == "speak" and message["text"] == "stream-failure":
                await self._emit(ResponseStreamEventInternalStreamFailure(
                    value=InternalStreamFailure(message="stream reset")))
            elif kind == "speak" and message["text"] == "hang-up":
                await self.responses.close()
                return
            elif kind == "speak" and message["text"] == "bad-voice":
                await self._text({"type": "error", "code": "unknown_voice", "field": "voice", "id": message["id"],
                                  "message": "voice: unknown voice 'x'; available: af_heart"})
            elif kind == "speak":
                uid = message["id"]
                await self._text({"type": "utterance_start", "id": uid, "turn": self._turn, "text": message["text"]},
                                 split=True)
                await self._part(b"\x01\x00" * 10, "BINARY")
                await self._part(b"\x02\x00" * 10, "BINARY")
                await self._text({"type": "utterance_end", "id": uid, "turn": self._turn, "audio_ms": 1,
                                  "synthesis_ms": 1, "bytes": 40, "format": "pcm", "sample_rate": 24000})
            elif kind == "flush":
                await self._text({"type": "turn_end", "turn": self._turn, "utterances": 1, "audio_ms": 1})
                self._turn += 1


def test_bidi_session_over_the_sdk_event_stream() -> None:
    endpoint = SimulatedEndpoint()

    async def body() -> tuple[Configured | None, list[TtsEvent]]:
        session = await connect_sagemaker("kokoro-tts", client=endpoint, receive_timeout=5,
                                          target_variant="AllTraffic")
        configured = await session.configure(voice="af_heart")
        events = [e async for e in session.speak_stream(["Hello there."])]
        await session.close()
        return configured, events

    configured, events = run(body())
    assert endpoint.invoked[0].endpoint_name == "kokoro-tts" and endpoint.invoked[0].target_variant == "AllTraffic"
    assert isinstance(configured, Configured) and configured.voice == "af_heart"
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["UtteranceStart", "AudioChunk", "AudioChunk", "UtteranceEnd", "TurnEnd"]
    start, end = events[0], events[3]
    assert isinstance(start, UtteranceStart) and start.text == "Hello there."  # reassembled from 2 parts
    assert isinstance(end, UtteranceEnd) and end.id == start.id
    assert all(isinstance(e, AudioChunk) and e.utterance_id == start.id for e in events[1:3])
    assert isinstance(events[-1], TurnEnd)
    # Every frame went out as a PayloadPart marked UTF8, so SageMaker hands it on as a text frame.
    assert {(kind, data_type) for kind, data_type, _ in endpoint.received} == {("PayloadPart", "UTF8")}
    sent = [json.loads(payload)["type"] for _, _, payload in endpoint.received]
    assert sent == ["configure", "speak", "flush", "close"]


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        ("bad-voice", TtsServerError, "unknown voice"),
        ("model-error", TtsServerError, "the container crashed"),
        ("stream-failure", TtsConnectionError, "stream reset"),
        ("hang-up", TtsConnectionError, "closed the stream"),
    ],
)
def test_bidi_errors_are_typed(text: str, error: type[Exception], match: str) -> None:
    endpoint = SimulatedEndpoint()

    async def body() -> None:
        session = await connect_sagemaker("kokoro-tts", client=endpoint, receive_timeout=5)
        with pytest.raises(error, match=match) as info:
            async for _ in session.speak_stream([text]):
                pass
        if text == "model-error":
            assert isinstance(info.value, TtsServerError) and info.value.code == "ModelCrashed"
        await session.close()

    run(body())


def test_bidi_sends_binary_frames_as_binary_parts() -> None:
    endpoint = SimulatedEndpoint()

    async def body() -> None:
        session = await connect_sagemaker("kokoro-tts", client=endpoint, receive_timeout=5)
        await session._transport.send_bytes(json.dumps({"type": "flush"}).encode())
        assert isinstance(await anext(session.events()), TurnEnd)
        await session.close()

    run(body())
    assert endpoint.received[0][:2] == ("PayloadPart", "BINARY")


class CountingProvider(botocore.credentials.CredentialProvider):  # type: ignore[misc]
    """Hands boto3 refreshable credentials whose refresh we can count (each lasts one minute)."""

    METHOD = "test-refreshing"

    def __init__(self) -> None:
        super().__init__()
        self.refreshes = 0

    def _fetch(self) -> dict[str, str]:
        self.refreshes += 1
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)
        return {"access_key": f"AKIA{self.refreshes}", "secret_key": "secret", "token": f"token-{self.refreshes}",
                "expiry_time": expiry.isoformat()}

    def load(self) -> botocore.credentials.RefreshableCredentials:
        return botocore.credentials.RefreshableCredentials.create_from_metadata(
            metadata=self._fetch(), refresh_using=self._fetch, method=self.METHOD)


def test_credentials_are_resolved_from_boto3_and_refreshed() -> None:
    provider = CountingProvider()
    core = botocore.session.Session()
    core.get_component("credential_provider").insert_before("env", provider)
    resolver = BotoCredentialsResolver(session=boto3.Session(botocore_session=core))

    first = run(resolver.get_identity(properties={}))
    second = run(resolver.get_identity(properties={}))
    # Within a minute of expiry, botocore refreshes on every get_frozen_credentials().
    assert first.access_key_id != second.access_key_id and second.session_token == f"token-{provider.refreshes}"
    assert provider.refreshes >= 2


def test_bidi_configuration_errors_are_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert endpoint_uri("eu-west-1") == "https://runtime.sagemaker.eu-west-1.amazonaws.com:8443"
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(TtsConfigError, match="region"):
        run(connect_sagemaker("kokoro-tts"))
    try:
        import awscrt  # noqa: F401
    except ImportError:
        with pytest.raises(TtsConfigError, match=r"awscrt"):
            run(connect_sagemaker("kokoro-tts", region="us-east-1"))


# ---- InvokeEndpointWithResponseStream (boto3) -----------------------------------------------

def _event(event_type: str, payload: bytes) -> bytes:
    return EventMessage(headers={":message-type": "event", ":event-type": event_type,
                                 ":content-type": "application/octet-stream"}, payload=payload).encode()


def _exception(exception_type: str, body: dict[str, str]) -> bytes:
    return EventMessage(headers={":message-type": "exception", ":exception-type": exception_type,
                                 ":content-type": "application/json"}, payload=json.dumps(body).encode()).encode()


def _client(status: int, body: bytes, headers: dict[str, str], seen: list[Any]) -> Any:
    client = boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1").client(
        "sagemaker-runtime")

    def answer(request: Any, **_: Any) -> AWSResponse:
        seen.append(request)
        raw = urllib3.HTTPResponse(body=io.BytesIO(body), status=status, headers=headers, preload_content=False)
        return AWSResponse(request.url, status, headers, raw)

    client.meta.events.register("before-send.sagemaker-runtime.InvokeEndpointWithResponseStream", answer)
    return client


STREAM_HEADERS = {"Content-Type": "application/vnd.amazon.eventstream", "X-Amzn-Invoked-Production-Variant": "v1"}


def test_response_stream_yields_payload_parts() -> None:
    seen: list[Any] = []
    body = _event("PayloadPart", b"\x01\x02") + _event("PayloadPart", b"\x03\x04" * 1000)
    tts = SageMakerStreamingTts(endpoint_name="kokoro-tts", client=_client(200, body, STREAM_HEADERS, seen))

    async def body_() -> list[bytes]:
        return [chunk async for chunk in tts.stream(SynthesisRequest(text="Hello.", voice="af_heart"))]

    assert run(body_()) == [b"\x01\x02", b"\x03\x04" * 1000]
    request = seen[0]
    assert request.url.endswith("/endpoints/kokoro-tts/invocations-response-stream")
    assert request.headers["Content-Type"] == b"application/json"
    assert json.loads(request.body) == SynthesisRequest(text="Hello.", voice="af_heart").to_json()


def test_response_stream_decodes_sse() -> None:
    sse = (b'event: start\ndata: {"id": "r"}\n\nevent: audio\ndata: {"index": 0, "audio": "AQI="}\n\n'
           b'event: end\ndata: {"chunks": 1}\n\n')
    body = _event("PayloadPart", sse[:30]) + _event("PayloadPart", sse[30:])
    tts = SageMakerStreamingTts(endpoint_name="e", client=_client(200, body, STREAM_HEADERS, []))

    async def body_() -> bytes:
        return b"".join([c async for c in tts.stream(SynthesisRequest(text="Hi.", transport="sse"))])

    assert run(body_()) == b"\x01\x02"


def test_response_stream_model_stream_error_mid_stream() -> None:
    body = _event("PayloadPart", b"\x01\x02") + _exception("ModelStreamError", {"Message": "model died",
                                                                                "ErrorCode": "ModelCrashed"})
    tts = SageMakerStreamingTts(endpoint_name="e", client=_client(200, body, STREAM_HEADERS, []))
    received: list[bytes] = []

    async def body_() -> None:
        async for chunk in tts.stream(SynthesisRequest(text="Hi.")):
            received.append(chunk)

    with pytest.raises(TtsServerError, match="model died") as info:
        run(body_())
    assert received == [b"\x01\x02"] and info.value.code == "ModelStreamError"


def test_response_stream_internal_failure_is_a_connection_error() -> None:
    body = _exception("InternalStreamFailure", {"Message": "stream reset"})
    tts = SageMakerStreamingTts(endpoint_name="e", client=_client(200, body, STREAM_HEADERS, []))

    async def body_() -> None:
        async for _ in tts.stream(SynthesisRequest(text="Hi.")):
            pass

    with pytest.raises(TtsConnectionError, match="stream reset"):
        run(body_())


def test_model_error_carries_the_containers_own_error() -> None:
    original = json.dumps({"error": {"code": "invalid_field", "field": "speed",
                                     "message": "speed: must be between 0.5 and 2.0, got 9"}})
    body = json.dumps({"ErrorCode": "CLIENT_ERROR_FROM_MODEL", "Message": "Received client error (400)",
                       "OriginalStatusCode": 400, "OriginalMessage": original}).encode()
    headers = {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError"}
    tts = SageMakerStreamingTts(endpoint_name="e", client=_client(424, body, headers, []))

    async def body_() -> None:
        async for _ in tts.stream(SynthesisRequest(text="Hi.", speed=9.0)):
            pass

    with pytest.raises(TtsServerError) as info:
        run(body_())
    assert (info.value.code, info.value.field, info.value.status) == ("invalid_field", "speed", 400)
    assert "between 0.5 and 2.0" in info.value.message


def test_missing_endpoint_is_a_clear_server_error() -> None:
    body = json.dumps({"message": "Endpoint kokoro-tts of account 123456789012 not found."}).encode()
    headers = {"Content-Type": "application/json", "x-amzn-ErrorType": "ValidationError"}
    tts = SageMakerStreamingTts(endpoint_name="kokoro-tts", client=_client(400, body, headers, []))

    async def body_() -> None:
        async for _ in tts.stream(SynthesisRequest(text="Hi.")):
            pass

    with pytest.raises(TtsServerError, match="not found") as info:
        run(body_())
    assert info.value.code == "endpoint_not_found"
