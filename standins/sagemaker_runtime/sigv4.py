"""SigV4 checks, as AWS makes them: the request's Authorization header, then every signed event.

The request is re-signed with ``aws_sdk_signers.AsyncSigV4Signer`` (the field's implementation, not
ours) over exactly the headers the client says it signed, and the signatures compared. That signer
leaves some headers out when it signs (``accept``, ``user-agent``, ...), but a client may sign them
(botocore signs ``accept``) and AWS checks every header named in SignedHeaders, so here it leaves
none out. Events in an ``application/vnd.amazon.eventstream`` request body are each wrapped in a
message carrying ``:date`` and ``:chunk-signature``; every signature chains on the previous one,
starting from the request's ("Signature Version 4 for event streams" in AWS's docs). Credentials
are fixed: the stand-in accepts only the key pair it was started with.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
from dataclasses import dataclass, field

from aws_sdk_signers import URI, AsyncBytesReader, AsyncSigV4Signer, AWSCredentialIdentity, AWSRequest, Field, Fields
from smithy_aws_event_stream.events import EventHeaderEncoder, EventMessage

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW = datetime.timedelta(minutes=5)
_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$")


class AuthError(Exception):
    """A request or event that AWS would refuse: ``code`` is the error type AWS answers with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, kw_only=True)
class Credentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)


@dataclass(frozen=True, kw_only=True)
class IncomingRequest:
    """What arrived: method, raw path and query, headers in order, and the body when it is not a stream."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes | None = None

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ",".join(values) if values else None


class _SignedHeadersSigner(AsyncSigV4Signer):
    """The field's signer, canonicalizing every header it is given: they are exactly SignedHeaders."""

    def _is_signable_header(self, field_name: str) -> bool:
        return True


@dataclass(frozen=True, kw_only=True)
class VerifiedRequest:
    signature: str  # hex: the seed of the event signature chain
    scope: str  # date/region/service/aws4_request


class RequestVerifier:
    """Checks a request's SigV4 Authorization header against the one key pair this service accepts."""

    def __init__(self, *, credentials: Credentials, region: str, service: str = "sagemaker") -> None:
        self._credentials = credentials
        self._region = region
        self._service = service

    async def verify(self, request: IncomingRequest, *, now: datetime.datetime | None = None) -> VerifiedRequest:
        authorization = request.header("authorization")
        if not authorization:
            raise AuthError("MissingAuthenticationTokenException", "Missing Authentication Token")
        match = _AUTH.match(authorization.strip())
        if match is None:
            raise AuthError("IncompleteSignatureException", f"Authorization header is not {ALGORITHM} SigV4")
        credential, signed_headers, signature = match.groups()
        key_id, _, scope = credential.partition("/")
        if key_id != self._credentials.access_key_id:
            raise AuthError("UnrecognizedClientException", "The security token included in the request is invalid.")
        amz_date = request.header("x-amz-date") or ""
        self._check_scope(scope, amz_date, now=now)
        names = signed_headers.split(";")
        if "host" not in names:
            raise AuthError("IncompleteSignatureException", "SignedHeaders must include host")
        fields = Fields([Field(name=n, values=[request.header(n) or ""]) for n in names])
        host = request.header("host") or ""
        aws_request = AWSRequest(
            destination=URI(scheme="https", host=host.rsplit(":", 1)[0], path=request.path,
                            query=request.query or None),
            method=request.method, body=AsyncBytesReader(request.body or b""), fields=fields,
        )
        signed = await _SignedHeadersSigner().sign(  # honours a signed X-Amz-Content-SHA256, as AWS does
            request=aws_request,
            identity=AWSCredentialIdentity(access_key_id=self._credentials.access_key_id,
                                           secret_access_key=self._credentials.secret_access_key),
            properties={"region": self._region, "service": self._service, "date": amz_date},
        )
        expected = signed.fields["Authorization"].as_string().rsplit("Signature=", 1)[-1]
        if not hmac.compare_digest(expected, signature):
            raise AuthError("InvalidSignatureException",
                            "The request signature we calculated does not match the signature you provided. "
                            "Check your AWS Secret Access Key and signing method.")
        return VerifiedRequest(signature=signature, scope=scope)

    def _check_scope(self, scope: str, amz_date: str, *, now: datetime.datetime | None) -> None:
        parts = scope.split("/")
        if len(parts) != 4 or parts[3] != "aws4_request":
            raise AuthError("IncompleteSignatureException", f"Credential scope {scope!r} is malformed")
        date, region, service, _ = parts
        if region != self._region or service != self._service:
            raise AuthError("InvalidSignatureException",
                            f"Credential should be scoped to a valid region and service: expected "
                            f"{self._region}/{self._service}, got {region}/{service}")
        try:
            signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
        except ValueError:
            raise AuthError("IncompleteSignatureException", "X-Amz-Date is missing or malformed") from None
        if amz_date[:8] != date:
            raise AuthError("InvalidSignatureException", "Credential scope date does not match X-Amz-Date")
        if abs((now or datetime.datetime.now(datetime.UTC)) - signed_at) > MAX_SKEW:
            raise AuthError("InvalidSignatureException", "Signature expired: X-Amz-Date is more than 5 minutes off")


class EventSignatureChain:
    """Checks each signed event-stream message; the chain starts at the request's signature."""

    def __init__(self, *, credentials: Credentials, verified: VerifiedRequest) -> None:
        self._secret = credentials.secret_access_key
        self._scope_tail = verified.scope.split("/", 1)[1]  # region/service/aws4_request
        self._prior = verified.signature
        self.finished = False

    def verify(self, message: EventMessage) -> bytes:
        """The inner message's bytes, once the envelope's signature is the one the chain expects."""
        if self.finished:
            raise AuthError("InvalidSignatureException", "an event arrived after the signed end of stream")
        date = message.headers.get(":date")
        signature = message.headers.get(":chunk-signature")
        if not isinstance(date, datetime.datetime) or not isinstance(signature, bytes):
            raise AuthError("IncompleteSignatureException", "event is not signed (:date / :chunk-signature missing)")
        timestamp = date.astimezone(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        encoder = EventHeaderEncoder()
        encoder.encode_headers({":date": date})
        string_to_sign = "\n".join([
            "AWS4-HMAC-SHA256-PAYLOAD", timestamp, f"{timestamp[:8]}/{self._scope_tail}", self._prior,
            hashlib.sha256(encoder.get_result()).hexdigest(), hashlib.sha256(message.payload).hexdigest(),
        ])
        expected = hmac.new(self._signing_key(timestamp[:8]), string_to_sign.encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, signature):
            raise AuthError("InvalidSignatureException", "event signature does not match (:chunk-signature)")
        self._prior = expected.hex()
        if not message.payload:
            self.finished = True  # the signed empty message that ends the client's stream
        return message.payload

    def _signing_key(self, day: str) -> bytes:
        key = ("AWS4" + self._secret).encode()
        for part in (day, *self._scope_tail.split("/")):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        return key
