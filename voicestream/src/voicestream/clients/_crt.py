"""The SDK's CRT HTTP/2 client with a CA bundle, a connect timeout and its body tasks tracked (imported
only when used).

smithy-http 0.6's ``AWSCRTHTTPClient`` builds its TLS context from the system trust store and has
no setting for another CA, and its ``__deepcopy__`` (the SDK deep-copies its config) rebuilds a
plain client; this subclass keeps both settings through the copy.
"""

from __future__ import annotations

import asyncio
from typing import Any

from awscrt import io as crt_io
from smithy_http.aio.crt import AWSCRTHTTPClient

from .errors import TtsConfigError


class CaBundleCRTClient(AWSCRTHTTPClient):
    """HTTP/2 over TLS trusting ``ca_bundle`` (when given) instead of the system store."""

    def __init__(self, *, ca_bundle: str | None = None, connect_timeout_s: float = 10.0,
                 eventloop: Any | None = None) -> None:
        super().__init__(eventloop=eventloop)
        self._ca_bundle = ca_bundle
        self._connect_timeout_s = connect_timeout_s
        if not hasattr(self, "_tls_ctx") or not hasattr(self, "_socket_options"):
            raise TtsConfigError("smithy-http's CRT client changed shape: pin smithy-http==0.6.0")
        if ca_bundle:
            options = crt_io.TlsContextOptions()
            try:
                options.override_default_trust_store_from_path(ca_filepath=ca_bundle)
            except Exception as exc:  # noqa: BLE001 - awscrt raises its own error type for a bad file
                raise TtsConfigError(f"AWS_CA_BUNDLE: cannot load {ca_bundle!r}: {exc}") from exc
            self._tls_ctx = crt_io.ClientTlsContext(options)
        self._socket_options.connect_timeout_ms = max(1, int(connect_timeout_s * 1000))

    def __deepcopy__(self, memo: Any) -> CaBundleCRTClient:
        return CaBundleCRTClient(ca_bundle=self._ca_bundle, connect_timeout_s=self._connect_timeout_s,
                                 eventloop=self._eventloop)


class WriterTrackingCRTClient(CaBundleCRTClient):
    """Adds to ``writers`` the request-body task of each stream it opens.

    awscrt writes an HTTP/2 request body from a task of its own that ends by writing END_STREAM; once
    the endpoint has ended the stream (a 403 for refused credentials, a reset), that write raises and
    nobody awaits the task, so asyncio prints its four chained tracebacks when the loop closes.
    ``_sdk_streams.reap_writers`` ends and awaits them instead.
    """

    def __init__(self, *, writers: set[asyncio.Task[Any]], ca_bundle: str | None = None,
                 connect_timeout_s: float = 10.0, eventloop: Any | None = None) -> None:
        super().__init__(ca_bundle=ca_bundle, connect_timeout_s=connect_timeout_s, eventloop=eventloop)
        self._writers = writers

    async def _await_response(self, stream: Any) -> Any:  # smithy-http 0.6: each new CRT stream passes here
        writer = getattr(stream, "_writer", None)  # awscrt 0.32's request-body task
        if isinstance(writer, asyncio.Task):
            self._writers.add(writer)
        return await super()._await_response(stream)

    def __deepcopy__(self, memo: Any) -> WriterTrackingCRTClient:  # the SDK copies its config per call
        return WriterTrackingCRTClient(writers=self._writers, ca_bundle=self._ca_bundle,
                                       connect_timeout_s=self._connect_timeout_s, eventloop=self._eventloop)
