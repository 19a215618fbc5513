"""InvokeEndpoint and InvokeEndpointWithResponseStream through REAL boto3, reaching the stand-in only
through ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` and ``AWS_CA_BUNDLE``, relayed to the REAL tiny-model
Kokoro server's ``POST /invocations``.
"""

from __future__ import annotations

import asyncio
import json

import boto3
import botocore.exceptions
import pytest
from sagemaker_local_fixture import SageMakerLocal

from voicestream.clients import TtsServerError
from voicestream.clients.sagemaker import SageMakerStreamingTts
from voicestream.protocol import SynthesisRequest


@pytest.fixture
def aws_env(sagemaker_local: SageMakerLocal, monkeypatch: pytest.MonkeyPatch) -> SageMakerLocal:
    for name, value in sagemaker_local.client_env().items():
        monkeypatch.setenv(name, value)
    return sagemaker_local


def runtime() -> object:
    return boto3.Session().client("sagemaker-runtime")


def test_invoke_endpoint_returns_the_containers_audio(aws_env: SageMakerLocal) -> None:
    response = runtime().invoke_endpoint(  # type: ignore[attr-defined]
        EndpointName=aws_env.endpoint_name, ContentType="application/json",
        Body=json.dumps({"text": "Hello there.", "format": "wav"}))
    body = response["Body"].read()
    assert response["ContentType"] == "audio/wav" and body[:4] == b"RIFF" and len(body) > 1000
    assert response["InvokedProductionVariant"] == "AllTraffic"


def test_a_container_4xx_is_a_model_error_with_the_original_status_and_message(aws_env: SageMakerLocal) -> None:
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        runtime().invoke_endpoint(  # type: ignore[attr-defined]
            EndpointName=aws_env.endpoint_name, ContentType="application/json",
            Body=json.dumps({"text": "Hi.", "speed": 9}))
    error = refused.value.response
    assert error["Error"]["Code"] == "ModelError" and error["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert error["OriginalStatusCode"] == 400 and "speed" in error["OriginalMessage"]


def test_response_stream_parts_add_up_to_the_whole_answer(aws_env: SageMakerLocal) -> None:
    response = runtime().invoke_endpoint_with_response_stream(  # type: ignore[attr-defined]
        EndpointName=aws_env.endpoint_name, ContentType="application/json",
        Body=json.dumps({"text": "One sentence. And a second one.", "format": "pcm"}))
    parts = [event["PayloadPart"]["Bytes"] for event in response["Body"] if "PayloadPart" in event]
    assert response["ContentType"] == "audio/pcm"
    assert len(parts) >= 2 and sum(len(p) for p in parts) % 2 == 0 and sum(len(p) for p in parts) > 0


def test_our_streaming_client_through_the_stand_in(aws_env: SageMakerLocal) -> None:
    async def body() -> bytes:
        tts = SageMakerStreamingTts(endpoint_name=aws_env.endpoint_name)
        return b"".join([chunk async for chunk in tts.stream(SynthesisRequest(text="Hello there.", transport="sse"))])

    audio = asyncio.run(asyncio.wait_for(body(), 60))
    assert len(audio) > 1000 and len(audio) % 2 == 0


def test_our_streaming_client_maps_a_refused_request_to_the_containers_error(aws_env: SageMakerLocal) -> None:
    async def body() -> None:
        tts = SageMakerStreamingTts(endpoint_name=aws_env.endpoint_name)
        async for _ in tts.stream(SynthesisRequest(text="Hi.", voice="no_such_voice")):
            pass

    with pytest.raises(TtsServerError) as refused:
        asyncio.run(asyncio.wait_for(body(), 60))
    assert refused.value.code == "unknown_voice" and refused.value.status == 400


def test_wrong_secret_key_is_refused_as_aws_refuses_it(
    aws_env: SageMakerLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-right-secret")
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        runtime().invoke_endpoint(EndpointName=aws_env.endpoint_name, Body=b"{}")  # type: ignore[attr-defined]
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_explicit_endpoint_url_wins_over_the_environment(
    aws_env: SageMakerLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "https://127.0.0.1:9")  # nothing listens there

    async def body() -> bytes:
        tts = SageMakerStreamingTts(endpoint_name=aws_env.endpoint_name, endpoint_url=aws_env.endpoint_url)
        return b"".join([chunk async for chunk in tts.stream(SynthesisRequest(text="Hi."))])

    assert len(asyncio.run(asyncio.wait_for(body(), 60))) > 0


def test_unknown_endpoint_is_a_validation_error(aws_env: SageMakerLocal) -> None:
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        runtime().invoke_endpoint(EndpointName="no-such-endpoint", Body=b"{}")  # type: ignore[attr-defined]
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert "not found" in refused.value.response["Error"]["Message"]


