"""The stand-in checks SigV4 over every header the client signed, as AWS does (issue 34, item 5).

botocore signs ``accept`` (and every ``x-amzn-sagemaker-*`` header it sends); a signer the stand-in
used to re-sign with leaves ``accept`` out, so ``invoke_endpoint(Accept=...)`` was refused. Checked
first against requests botocore signs, then through REAL boto3 to the REAL stand-in and tiny-model
Kokoro server.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import boto3
import botocore.auth
import botocore.awsrequest
import botocore.credentials
import botocore.exceptions
import pytest
from sagemaker_local_fixture import SageMakerLocal

from standins.sagemaker_runtime.sigv4 import AuthError, Credentials, IncomingRequest, RequestVerifier

CREDS = Credentials(access_key_id="AKIDEXAMPLE", secret_access_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
PATH = "/endpoints/kokoro-tts/invocations"
SAGEMAKER_HEADERS = {  # what invoke_endpoint sends for its optional parameters
    "Content-Type": "application/json", "Accept": "audio/wav",
    "X-Amzn-SageMaker-Custom-Attributes": "trace=abc,  spaced   value ",
    "X-Amzn-SageMaker-Inference-Id": "inference-1", "X-Amzn-SageMaker-Target-Variant": "AllTraffic",
    "X-Amzn-SageMaker-Target-Model": "model.tar.gz", "X-Amzn-SageMaker-Session-Id": "NEW_SESSION",
}


class SignEveryHeader(botocore.auth.SigV4Auth):  # type: ignore[misc]  # botocore is untyped here (Any)
    """botocore's SigV4 with no header left out: a client may sign user-agent or x-amzn-trace-id too."""

    def headers_to_sign(self, request: botocore.awsrequest.AWSRequest) -> Any:
        headers = super().headers_to_sign(request)
        for name, value in request.headers.items():
            if name.lower() not in headers:  # HTTPHeaders adds, it does not replace
                headers[name.lower()] = value
        return headers


def signed(headers: dict[str, str], *, body: bytes = b"{}",
           auth: type[botocore.auth.SigV4Auth] = botocore.auth.SigV4Auth,
           secret: str = CREDS.secret_access_key) -> IncomingRequest:
    request = botocore.awsrequest.AWSRequest(method="POST", url=f"https://127.0.0.1:8443{PATH}", data=body,
                                             headers=headers)
    auth(botocore.credentials.Credentials(CREDS.access_key_id, secret), "sagemaker", "us-east-1").add_auth(request)
    sent = [(k.lower(), v if isinstance(v, str) else v.decode()) for k, v in request.headers.items()]
    return IncomingRequest(method="POST", path=PATH, query="", headers=[("host", "127.0.0.1:8443"), *sent], body=body)


def signed_header_names(request: IncomingRequest) -> list[str]:
    authorization = request.header("authorization") or ""
    return authorization.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")


def verify(request: IncomingRequest) -> None:
    asyncio.run(RequestVerifier(credentials=CREDS, region="us-east-1").verify(request))


def replaced(request: IncomingRequest, name: str, value: str) -> IncomingRequest:
    headers = [(k, value if k == name else v) for k, v in request.headers]
    return IncomingRequest(method=request.method, path=request.path, query="", headers=headers, body=request.body)


def test_every_header_botocore_signs_for_invoke_endpoint_is_checked_and_passes() -> None:
    request = signed(SAGEMAKER_HEADERS)
    assert {"accept", "content-type", "x-amzn-sagemaker-custom-attributes"} <= set(signed_header_names(request))
    verify(request)


def test_headers_any_signer_chooses_to_sign_pass_user_agent_and_trace_id_included() -> None:
    request = signed({**SAGEMAKER_HEADERS, "User-Agent": "Boto3/1.40 md/x", "X-Amzn-Trace-Id": "Root=1-abc"},
                     auth=SignEveryHeader)
    assert {"user-agent", "x-amzn-trace-id", "accept"} <= set(signed_header_names(request))
    verify(request)


@pytest.mark.parametrize("name", ["accept", "content-type", "x-amzn-sagemaker-custom-attributes"])
def test_a_signed_header_changed_after_signing_is_refused(name: str) -> None:
    with pytest.raises(AuthError) as refused:
        verify(replaced(signed(SAGEMAKER_HEADERS), name, "changed/after-signing"))
    assert refused.value.code == "InvalidSignatureException"


def test_a_header_the_client_did_not_sign_may_change() -> None:
    request = signed({"Content-Type": "application/json"})
    verify(IncomingRequest(method="POST", path=PATH, query="", body=request.body,
                           headers=[*request.headers, ("accept", "audio/wav"), ("user-agent", "added-by-a-proxy")]))


@pytest.fixture
def runtime(sagemaker_local: SageMakerLocal, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in sagemaker_local.client_env().items():
        monkeypatch.setenv(name, value)
    return boto3.Session().client("sagemaker-runtime")


def test_boto3_invoke_endpoint_with_accept_and_every_optional_header_gets_the_audio(
    runtime: Any, sagemaker_local: SageMakerLocal
) -> None:
    response = runtime.invoke_endpoint(
        EndpointName=sagemaker_local.endpoint_name, ContentType="application/json", Accept="audio/wav",
        CustomAttributes="trace=abc,  spaced   value ", InferenceId="inference-1", TargetVariant="AllTraffic",
        Body=json.dumps({"text": "Hello there.", "format": "wav"}))
    body = response["Body"].read()
    assert response["ContentType"] == "audio/wav" and body[:4] == b"RIFF" and len(body) > 1000


def test_boto3_response_stream_with_accept_gets_the_audio(runtime: Any, sagemaker_local: SageMakerLocal) -> None:
    response = runtime.invoke_endpoint_with_response_stream(  # Accept travels as X-Amzn-SageMaker-Accept here
        EndpointName=sagemaker_local.endpoint_name, ContentType="application/json", Accept="audio/pcm",
        CustomAttributes="trace=abc", InferenceId="inference-2",
        Body=json.dumps({"text": "Hello there.", "format": "pcm"}))
    audio = b"".join(event["PayloadPart"]["Bytes"] for event in response["Body"] if "PayloadPart" in event)
    assert response["ContentType"] == "audio/pcm" and len(audio) > 1000


def test_boto3_with_accept_and_a_wrong_secret_is_still_refused(
    sagemaker_local: SageMakerLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in sagemaker_local.client_env(secret="not-the-right-secret").items():
        monkeypatch.setenv(name, value)
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        boto3.Session().client("sagemaker-runtime").invoke_endpoint(
            EndpointName=sagemaker_local.endpoint_name, Accept="audio/wav", Body=b"{}")
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"
