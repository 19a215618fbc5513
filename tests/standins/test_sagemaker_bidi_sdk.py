"""InvokeEndpointWithBidirectionalStream through the REAL SDK (no ``client=``), the stand-in and the REAL
tiny-model Kokoro server: HTTP/2 over TLS, SigV4 on the request and on every event, the AWS event
stream, and the relay to the container's WebSocket.

The stand-in is ours, so what it does beyond the API model is our reading of AWS's docs
(docs/sagemaker-local.md); the SDK, the signer, the framing and the container are not ours.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx
import pytest
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventPayloadPart,
)
from sagemaker_local_fixture import ACCESS_KEY_ID, SECRET_ACCESS_KEY, SageMakerLocal
from smithy_aws_core.identity import StaticCredentialsResolver
from waiting import wait_until_async

from voicestream.clients import (
    AudioChunk,
    Cancelled,
    Configured,
    TtsConfigError,
    TtsConnectionError,
    TtsEvent,
    TtsServerError,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
    connect_sagemaker,
)
from voicestream.clients._crt import CaBundleCRTClient

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 90.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


@pytest.fixture
def aws_env(sagemaker_local: SageMakerLocal, monkeypatch: pytest.MonkeyPatch) -> SageMakerLocal:
    """The client side reaches the stand-in only through the environment, as boto3 defines it."""
    for name, value in sagemaker_local.client_env().items():
        monkeypatch.setenv(name, value)
    return sagemaker_local


def check_turn(events: list[TtsEvent], texts: list[str]) -> None:
    """Each utterance: start, its audio (bytes add up), end, in the order queued; then turn_end."""
    assert [e.text for e in events if isinstance(e, UtteranceStart)] == texts
    current: str | None = None
    received: dict[str, int] = {}
    for event in events:
        if isinstance(event, UtteranceStart):
            assert current is None
            current = event.id
        elif isinstance(event, AudioChunk):
            assert event.utterance_id == current is not None
            received[current] = received.get(current, 0) + len(event.data)
        elif isinstance(event, UtteranceEnd):
            assert event.id == current and event.bytes == received[current] > 0
            current = None
    assert isinstance(events[-1], TurnEnd) and events[-1].utterances == len(texts)


def test_pipelined_turn_through_the_sdk_arrives_in_order(aws_env: SageMakerLocal) -> None:
    texts = ["Hello there.", "The weather is fine today.", "Goodbye."]

    async def body() -> list[TtsEvent]:
        async with await connect_sagemaker(aws_env.endpoint_name) as session:
            configured = await session.configure(format="pcm")
            assert isinstance(configured, Configured) and configured.sample_rate == 24000
            return [e async for e in session.speak_stream(texts)]

    check_turn(run(body()), texts)


def test_cancel_mid_turn_stops_the_audio_and_the_session_goes_on(aws_env: SageMakerLocal) -> None:
    async def body() -> tuple[list[TtsEvent], list[TtsEvent]]:
        async with await connect_sagemaker(aws_env.endpoint_name) as session:
            await session.configure()
            await session.speak("This first sentence is long enough to still be speaking.", id="a")
            await session.speak("A second sentence that should never be heard.", id="b")
            before: list[TtsEvent] = []
            async for event in session.events():
                before.append(event)
                if isinstance(event, AudioChunk):
                    await session.cancel()
                if isinstance(event, Cancelled):
                    break
            after = [e async for e in session.speak_stream(["Okay."])]
            return before, after

    before, after = run(body())
    cancelled = before[-1]
    assert isinstance(cancelled, Cancelled) and "b" in cancelled.ids
    assert not [e for e in after if isinstance(e, (AudioChunk, UtteranceStart)) and
                getattr(e, "utterance_id", getattr(e, "id", None)) in ("a", "b")]
    check_turn(after, ["Okay."])


def test_a_1_mib_frame_gets_the_containers_own_refusal_and_the_session_goes_on(aws_env: SageMakerLocal) -> None:
    async def body() -> tuple[TtsServerError, list[TtsEvent]]:
        async with await connect_sagemaker(aws_env.endpoint_name) as session:
            await session.configure()
            text = "x" * (1024 * 1024 - 64)  # the frame is just under 1 MiB: relayed whole, refused by size
            await session.speak(text, id="big")
            with pytest.raises(TtsServerError) as refused:
                async for _ in session.events():
                    pass
            return refused.value, [e async for e in session.speak_stream(["Still here."])]

    refused, after = run(body())
    assert refused.code == "frame_too_large"
    check_turn(after, ["Still here."])


def test_a_container_error_is_a_model_stream_error_and_our_server_error(aws_env: SageMakerLocal) -> None:
    async def body() -> TtsServerError:
        async with await connect_sagemaker(aws_env.endpoint_name) as session:
            await session.configure()
            await session.speak("x" * (1024 * 1024 + 16), id="huge")  # over 1 MiB: the container closes 1009
            with pytest.raises(TtsServerError) as failed:
                async for _ in session.events():
                    pass
            return failed.value

    error = run(body())
    assert error.code == "ModelStreamError" and "1009" in error.message


def test_wrong_secret_key_fails_at_connect_with_a_credentials_error(
    aws_env: SageMakerLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-right-secret")
    with pytest.raises(TtsConfigError, match="refused the AWS credentials.*InvalidSignatureException"):
        run(connect_sagemaker(aws_env.endpoint_name), timeout=30)


def test_unreachable_endpoint_fails_at_connect(aws_env: SageMakerLocal, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", f"https://127.0.0.1:{closed}")
    started = time.monotonic()
    with pytest.raises(TtsConnectionError, match="kokoro-tts"):
        run(connect_sagemaker(aws_env.endpoint_name, connect_timeout=5.0), timeout=60)
    assert time.monotonic() - started < 60  # bounded by the connect timeout and the SDK's retries


def test_unknown_endpoint_name_fails_at_connect(aws_env: SageMakerLocal) -> None:
    with pytest.raises(TtsServerError, match="ValidationError"):
        run(connect_sagemaker("no-such-endpoint"), timeout=30)


async def _raw_client(standin: SageMakerLocal) -> AsyncSageMakerRuntimeHTTP2Client:
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
        region=standin.region, endpoint_uri=standin.endpoint_url,
        aws_credentials_identity_resolver=StaticCredentialsResolver(),
        aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
        transport=CaBundleCRTClient(ca_bundle=standin.ca_bundle))
    return AsyncSageMakerRuntimeHTTP2Client(config=config)


def test_the_aws_samples_message_shape_over_raw_payload_parts(aws_env: SageMakerLocal) -> None:
    """As the AWS sample's client does it: the SDK alone, JSON bytes in a PayloadPart without DataType."""
    async def body() -> list[tuple[str | None, bytes]]:
        client = await _raw_client(aws_env)
        stream = await client.invoke_endpoint_with_bidirectional_stream(
            InvokeEndpointWithBidirectionalStreamInput(endpoint_name=aws_env.endpoint_name))
        request = {"text": "Hello from the sample.", "request_id": "r1", "voice": None}
        await stream.input_stream.send(RequestStreamEventPayloadPart(value=RequestPayloadPart(
            bytes_=json.dumps({k: v for k, v in request.items() if v is not None}).encode())))
        _, output = await stream.await_output()
        parts: list[tuple[str | None, bytes]] = []
        while (event := await output.receive()) is not None:
            assert isinstance(event, ResponseStreamEventPayloadPart)
            parts.append((event.value.data_type, event.value.bytes_ or b""))
            if event.value.data_type == "UTF8" and b"synthesis_complete" in (event.value.bytes_ or b""):
                await stream.input_stream.send(RequestStreamEventPayloadPart(value=RequestPayloadPart(
                    bytes_=b'{"type": "close"}', data_type="UTF8")))
        await stream.input_stream.close()
        await client._config.transport.close()
        return parts

    parts = run(body())
    texts: list[dict[str, Any]] = [json.loads(data) for kind, data in parts if kind == "UTF8"]
    assert [t["type"] for t in texts] == ["synthesis_start", "synthesis_complete"]
    assert texts[0]["request_id"] == texts[1]["request_id"] == "r1"
    audio = [data for kind, data in parts if kind == "BINARY"]
    assert audio and sum(len(a) for a in audio) == texts[1]["bytes"]
    # the container closed after {"type": "close"}: the response stream simply ended (no error event)


def test_closing_a_session_ends_both_sides_cleanly(aws_env: SageMakerLocal) -> None:
    """``close`` makes the container end first; the client's end of stream still lands on an open stream."""
    seen = len(aws_env.output)

    async def body() -> None:
        for _ in range(3):
            session = await connect_sagemaker(aws_env.endpoint_name)
            await session.configure()
            await session.close()
        # every relay has ended at the container (no session left there): whatever the closes
        # caused, the stand-in has logged it by now
        async with httpx.AsyncClient(trust_env=False) as http:
            async def sessions() -> int:
                count: int = (await http.get(f"{aws_env.container_url}/ping", timeout=5)).json()["sessions"]
                return count

            assert await wait_until_async(sessions, until=lambda n: n == 0, timeout=15) == 0

    run(body())
    new = "\n".join(aws_env.output[seen:])
    assert "Traceback" not in new and "Error" not in new, new


def test_a_container_that_refuses_the_websocket_fails_at_connect_as_a_model_error(aws_env: SageMakerLocal) -> None:
    """X-Amzn-SageMaker-Model-Invocation-Path picks the container's path; nothing serves this one."""
    with pytest.raises(TtsServerError) as refused:
        run(connect_sagemaker(aws_env.endpoint_name, model_invocation_path="no-such-path"), timeout=30)
    assert refused.value.code == "ModelError" and "/no-such-path" in refused.value.message
