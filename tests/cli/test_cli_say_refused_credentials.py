"""`deploy-tts say` with credentials the endpoint refuses: one clear line on stderr (issue 34, item 6).

Run as a user runs it, in a process of its own: what asyncio prints when the loop closes (the SDK's
HTTP/2 request-body task failing after the 403, four chained tracebacks) only shows there. The
endpoint is the REAL SageMaker stand-in, which refuses exactly as AWS does; an endpoint that never
answers (TLS and HTTP/2 agreed, then silence) left the same task behind.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from sagemaker_local_fixture import SageMakerLocal

DEPLOY_TTS = Path(sys.executable).parent / "deploy-tts"


def say(stand_in: SageMakerLocal, *, mode: str, url: str | None = None, **env_vars: str
        ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(stand_in.client_env(), COLUMNS="200", NO_COLOR="1", **env_vars)
    del env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"]  # the URL comes only from --endpoint-url
    return subprocess.run(
        [str(DEPLOY_TTS), "say", "Hello there.", "--endpoint-url", url or stand_in.endpoint_url,
         "--endpoint-name", stand_in.endpoint_name, "--mode", mode],
        env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def silent_h2_endpoint(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """An https URL that completes TLS (ALPN h2) and then never says a word, and its CA file."""
    ca = trustme.CA()
    ca_file = tmp_path / "silent-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    context.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                held.append(context.wrap_socket(conn, server_side=True))
            except OSError:
                conn.close()

    threading.Thread(target=serve, name="silent-h2", daemon=True).start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}", str(ca_file)
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize(("credentials", "code"), [
    ({"AWS_SECRET_ACCESS_KEY": "not-the-right-secret"}, "InvalidSignatureException"),
    ({"AWS_ACCESS_KEY_ID": "AKIDNOBODYHASTHIS"}, "UnrecognizedClientException"),
])
def test_bidi_with_refused_credentials_prints_one_line_naming_the_problem(
    sagemaker_local: SageMakerLocal, credentials: dict[str, str], code: str
) -> None:
    done = say(sagemaker_local, mode="bidi", **credentials)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"Error: {sagemaker_local.endpoint_name}: the endpoint refused the AWS credentials ({code}, HTTP 403); "
        "check the access key, secret key, session token and region"], done.stderr


def test_stream_mode_with_a_wrong_secret_prints_one_line_too(sagemaker_local: SageMakerLocal) -> None:
    done = say(sagemaker_local, mode="stream", AWS_SECRET_ACCESS_KEY="not-the-right-secret")
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("Error:") and "refused" in done.stderr and "signature" in done.stderr


def test_the_right_credentials_still_speak_through_the_same_command(sagemaker_local: SageMakerLocal) -> None:
    done = say(sagemaker_local, mode="bidi")
    assert done.returncode == 0, done.stderr
    assert "time to first audio" in done.stdout and "Traceback" not in done.stderr


def test_an_endpoint_that_never_answers_is_one_line_too(
    sagemaker_local: SageMakerLocal, silent_h2_endpoint: tuple[str, str]
) -> None:
    url, ca_file = silent_h2_endpoint
    done = say(sagemaker_local, mode="bidi", url=url, AWS_CA_BUNDLE=ca_file)
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("Error:") and "no answer within" in done.stderr
