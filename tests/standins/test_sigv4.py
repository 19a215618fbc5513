"""The stand-in's SigV4 checks against signatures made by the field's signers (botocore, aws_sdk_signers)."""

from __future__ import annotations

import asyncio
import datetime

import botocore.auth
import botocore.awsrequest
import botocore.credentials
import pytest
from aws_sdk_signers import AsyncEventSigner
from smithy_aws_core.identity import AWSCredentialsIdentity
from smithy_aws_event_stream.events import EventHeaderEncoder, EventMessage

from standins.sagemaker_runtime.sigv4 import (
    AuthError,
    Credentials,
    EventSignatureChain,
    IncomingRequest,
    RequestVerifier,
    VerifiedRequest,
)

CREDS = Credentials(access_key_id="AKIDEXAMPLE", secret_access_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
URL = "https://127.0.0.1:8443/endpoints/kokoro-tts/invocations"


def boto_signed(body: bytes, *, secret: str = CREDS.secret_access_key, key_id: str = CREDS.access_key_id,
                region: str = "us-east-1") -> IncomingRequest:
    request = botocore.awsrequest.AWSRequest(method="POST", url=URL, data=body,
                                             headers={"Content-Type": "application/json"})
    botocore.auth.SigV4Auth(botocore.credentials.Credentials(key_id, secret), "sagemaker", region).add_auth(request)
    headers = [(k.lower(), v if isinstance(v, str) else v.decode()) for k, v in request.headers.items()]
    return IncomingRequest(method="POST", path="/endpoints/kokoro-tts/invocations", query="",
                           headers=[("host", "127.0.0.1:8443"), *headers], body=body)


def verify(request: IncomingRequest, **kwargs: object) -> VerifiedRequest:
    return asyncio.run(RequestVerifier(credentials=CREDS, region="us-east-1").verify(request, **kwargs))  # type: ignore[arg-type]


def test_a_request_botocore_signed_with_the_right_key_passes() -> None:
    assert len(verify(boto_signed(b'{"text": "hi"}')).signature) == 64


@pytest.mark.parametrize(("change", "code"), [
    ({"secret": "wrong"}, "InvalidSignatureException"),
    ({"key_id": "AKIDOTHER"}, "UnrecognizedClientException"),
    ({"region": "eu-west-1"}, "InvalidSignatureException"),
])
def test_requests_aws_would_refuse_are_refused(change: dict[str, str], code: str) -> None:
    with pytest.raises(AuthError) as refused:
        verify(boto_signed(b"{}", **change))
    assert refused.value.code == code


def test_a_body_changed_after_signing_is_refused() -> None:
    signed = boto_signed(b'{"text": "hi"}')
    tampered = IncomingRequest(method=signed.method, path=signed.path, query="", headers=signed.headers,
                               body=b'{"text": "bye"}')
    with pytest.raises(AuthError, match="does not match"):
        verify(tampered)


def test_a_request_signed_too_long_ago_is_refused() -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=20)
    with pytest.raises(AuthError, match="expired"):
        verify(boto_signed(b"{}"), now=later)


def test_a_missing_authorization_header_is_refused() -> None:
    with pytest.raises(AuthError) as refused:
        verify(IncomingRequest(method="POST", path="/", query="", headers=[("host", "x")], body=b""))
    assert refused.value.code == "MissingAuthenticationTokenException"


async def _signed_events(payloads: list[bytes], *, secret: str, seed: str) -> list[EventMessage]:
    signer = AsyncEventSigner(initial_signature=seed.encode(), event_encoder_cls=EventHeaderEncoder)
    identity = AWSCredentialsIdentity(access_key_id=CREDS.access_key_id, secret_access_key=secret)
    properties = {"region": "us-east-1", "service": "sagemaker"}
    out: list[EventMessage] = []
    for p in payloads:
        signed = await signer.sign(event=EventMessage(payload=p), identity=identity, properties=properties)  # type: ignore[arg-type]
        assert isinstance(signed, EventMessage)  # the signer signs the event it is given and hands it back
        out.append(signed)
    end = await signer.sign_empty(event=EventMessage(), identity=identity, properties=properties)  # type: ignore[arg-type]
    assert isinstance(end, EventMessage)
    out.append(end)
    return out


def _chain() -> EventSignatureChain:
    today = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d")
    return EventSignatureChain(credentials=CREDS, verified=VerifiedRequest(
        signature="ab" * 32, scope=f"{today}/us-east-1/sagemaker/aws4_request"))


def test_events_signed_by_the_sdks_signer_pass_in_order_and_the_empty_one_ends_the_stream() -> None:
    events = asyncio.run(_signed_events([b"one", b"two"], secret=CREDS.secret_access_key, seed="ab" * 32))
    chain = _chain()
    inner = [EventMessage(payload=b"one").encode(), EventMessage(payload=b"two").encode(), b""]
    assert [chain.verify(e) for e in events] == inner  # each envelope's payload: the encoded inner event
    assert chain.finished


@pytest.mark.parametrize("attack", ["wrong_secret", "reordered", "tampered"])
def test_events_aws_would_refuse_are_refused(attack: str) -> None:
    secret = "wrong" if attack == "wrong_secret" else CREDS.secret_access_key
    events = asyncio.run(_signed_events([b"one", b"two"], secret=secret, seed="ab" * 32))
    if attack == "reordered":
        events = [events[1], events[0]]
    if attack == "tampered":
        events[0] = EventMessage(headers=events[0].headers, payload=b"One")
    with pytest.raises(AuthError, match="event signature"):
        chain = _chain()
        for event in events:
            chain.verify(event)
