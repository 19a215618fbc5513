"""connect_sagemaker's endpoint URL, CA bundle and fail-fast connect, with the real SDK and CRT client
against loopback sockets that refuse or never answer (no stand-in needed for these)."""

from __future__ import annotations

import asyncio
import copy
import socket
import time
from pathlib import Path

import pytest

from voicestream.clients import TtsConfigError, TtsConnectionError, TtsTimeoutError, connect_sagemaker
from voicestream.clients._crt import CaBundleCRTClient
from voicestream.clients.sagemaker_bidi import configured_endpoint_url

# awscrt 0.32 sets an exception on a connect future we cancelled (the silent peer's), from its own
# thread and later, so the warning lands on whichever test runs then
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "none"),
                        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_CA_BUNDLE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_closed_port_fails_at_connect_not_at_the_first_message() -> None:
    started = time.monotonic()
    with pytest.raises(TtsConnectionError, match="CONNECTION_REFUSED"):
        asyncio.run(connect_sagemaker("kokoro-tts", endpoint_url=f"https://127.0.0.1:{closed_port()}",
                                      connect_timeout=5.0))
    assert time.monotonic() - started < 30


def test_a_peer_that_never_answers_times_out_at_connect() -> None:
    with socket.socket() as silent:  # accepts TCP (the backlog does), never speaks TLS
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(TtsTimeoutError, match="no answer within 1 s"):
            asyncio.run(asyncio.wait_for(connect_sagemaker("kokoro-tts", endpoint_url=url, connect_timeout=1.0), 30))


def test_the_environment_url_is_used_and_must_be_https(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "http://127.0.0.1:8080")
    with pytest.raises(TtsConfigError, match="endpoint_url: 'http://127.0.0.1:8080' must be https://"):
        asyncio.run(connect_sagemaker("kokoro-tts"))


def test_endpoint_url_precedence_follows_boto3() -> None:
    assert configured_endpoint_url({}) is None
    assert configured_endpoint_url({"AWS_ENDPOINT_URL": "https://a"}) == "https://a"
    both = {"AWS_ENDPOINT_URL": "https://a", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": "https://b"}
    assert configured_endpoint_url(both) == "https://b"
    assert configured_endpoint_url({"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": "https://b",
                                    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}) is None


def test_the_ca_bundle_and_timeout_survive_the_sdks_deep_copy(tmp_path: Path) -> None:
    import trustme

    ca = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca))
    client = CaBundleCRTClient(ca_bundle=str(ca), connect_timeout_s=2.5)
    copied = copy.deepcopy(client)  # the SDK deep-copies its config, transport included
    assert isinstance(copied, CaBundleCRTClient)
    assert copied._ca_bundle == str(ca) and copied._socket_options.connect_timeout_ms == 2500


def test_an_unreadable_ca_bundle_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TtsConfigError, match="AWS_CA_BUNDLE"):
        CaBundleCRTClient(ca_bundle=str(tmp_path / "missing.pem"))
