"""`deploy-agent chat --web`: presigned WebSocket URLs for the deployed runtime, the local page server,
and the page asking it for a fresh URL before each connection (driven in Debian Chromium against a
real local agent). The signing is real botocore SigV4 (through bedrock-agentcore's
AgentCoreRuntimeClient, and the botocore-only fallback); nothing here talks to AWS."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import httpx
import pytest
from agent_harness import ANSWER, free_port, serve_agent, stats
from clitest_support import deploy_agent_runtime
from typer.testing import CliRunner
from waiting import wait_until

from cli import deploy_agent
from cli.agent_web import (
    MAX_EXPIRES_S,
    SESSION_HEADER,
    LocalAgentUrl,
    RuntimeUrlSigner,
    WebServer,
    new_session_id,
)
from cli.aws import make_target

ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/kokoro_voice_agent-AbC123xYz"
SECRET = "testing-secret"


@pytest.fixture
def env_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Static test credentials from the environment, nothing else (no profile files, no IMDS)."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing-token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def signer(**kwargs: Any) -> RuntimeUrlSigner:
    target = make_target(profile=kwargs.pop("profile", None), region="us-east-1")
    return RuntimeUrlSigner(session=target.session, region=target.region, runtime_arn=ARN, **kwargs)


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def sigv4_valid(url: str, secret: str) -> bool:
    """Recompute the SigV4 query signature from the spec (independently of botocore): non-S3 services
    encode the path once more in the canonical request, so the ARN's %3A becomes %253A there."""
    parts = urlsplit(url.replace("wss://", "https://", 1))
    params = query(url)
    signature = params.pop("X-Amz-Signature")
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params.items()))
    canonical = "\n".join(["GET", quote(parts.path, safe="/~"), canonical_query, f"host:{parts.hostname}\n", "host",
                           hashlib.sha256(b"").hexdigest()])
    scope = params["X-Amz-Credential"].split("/", 1)[1]
    to_sign = "\n".join(["AWS4-HMAC-SHA256", params["X-Amz-Date"], scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret}".encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.compare_digest(hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), signature)


def next_second() -> None:
    """Sleep into the next wall-clock second (X-Amz-Date has one-second resolution)."""
    now = time.time()
    time.sleep(1.02 - (now - int(now)))


# --- (1) the signer -------------------------------------------------------------------------------


def test_presigned_url_has_the_runtime_arn_expiry_and_a_fresh_signature(env_credentials: None) -> None:
    sign = signer()
    assert sign.uses_sdk  # bedrock-agentcore's AgentCoreRuntimeClient.generate_presigned_url
    session = new_session_id()
    first = sign(session)
    parts = urlsplit(first)
    assert (parts.scheme, parts.hostname) == ("wss", "bedrock-agentcore.us-east-1.amazonaws.com")
    # The whole ARN is one path segment, ':' and '/' percent-encoded.
    assert parts.path == f"/runtimes/{quote(ARN, safe='')}/ws"
    assert "arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fkokoro_voice_agent" in first
    params = query(first)
    assert params[SESSION_HEADER] == session
    assert params["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert 0 < int(params["X-Amz-Expires"]) <= 300 and int(params["X-Amz-Expires"]) == MAX_EXPIRES_S
    assert params["X-Amz-SignedHeaders"] == "host"
    signed_at = datetime.datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    assert abs((datetime.datetime.now(datetime.UTC) - signed_at).total_seconds()) < 5
    day = params["X-Amz-Date"][:8]
    assert params["X-Amz-Credential"] == f"testing/{day}/us-east-1/bedrock-agentcore/aws4_request"
    assert params["X-Amz-Security-Token"] == "testing-token"
    assert len(params["X-Amz-Signature"]) == 64
    assert sigv4_valid(first, SECRET) and not sigv4_valid(first, "another-secret")

    next_second()
    second = sign(session)  # the same session a second later: new date, new signature
    again = query(second)
    assert again["X-Amz-Date"] > params["X-Amz-Date"]
    assert again["X-Amz-Signature"] != params["X-Amz-Signature"]
    assert sigv4_valid(second, SECRET)
    other = sign(new_session_id())  # another session: another signature
    assert query(other)["X-Amz-Signature"] not in (params["X-Amz-Signature"], again["X-Amz-Signature"])


def test_botocore_fallback_signs_the_same_url_as_the_sdk(env_credentials: None) -> None:
    sdk, plain = signer(), signer(use_sdk=False)
    assert sdk.uses_sdk and not plain.uses_sdk
    session = new_session_id()
    for _ in range(5):  # both within one wall-clock second, then they must agree byte for byte
        a, b = sdk(session), plain(session)
        if query(a)["X-Amz-Date"] == query(b)["X-Amz-Date"]:
            break
    assert a == b
    assert sigv4_valid(b, SECRET)


def test_each_signing_uses_the_sessions_current_credentials(env_credentials: None, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Short-lived credentials from a credential_process (as with SSO or an assumed role): botocore
    refreshes them when they near expiry, and every URL carries the ones current at its signing."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    counter, script = tmp_path / "count", tmp_path / "creds.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'n=$(( $(cat "{counter}" 2>/dev/null || echo 0) + 1 )); echo $n > "{counter}"\n'
        "exp=$(date -u -d '+120 seconds' +%Y-%m-%dT%H:%M:%SZ)\n"  # inside botocore's refresh window
        'printf \'{"Version": 1, "AccessKeyId": "ASIAROTATE%d", "SecretAccessKey": "secret%d", '
        '"SessionToken": "token%d", "Expiration": "%s"}\\n\' $n $n $n "$exp"\n'
    )
    script.chmod(0o755)
    config = tmp_path / "config"
    config.write_text(f"[profile rotating]\ncredential_process = {script}\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for use_sdk in (True, False):
        sign = signer(profile="rotating", use_sdk=use_sdk)
        keys = []
        for _ in range(2):
            params = query(sign(new_session_id()))
            key = params["X-Amz-Credential"].split("/")[0]
            number = key.removeprefix("ASIAROTATE")
            assert params["X-Amz-Security-Token"] == f"token{number}"
            keys.append(int(number))
        assert keys[1] > keys[0], (use_sdk, keys)


def test_signer_refuses_an_expiry_over_300_seconds(env_credentials: None) -> None:
    with pytest.raises(ValueError):
        signer(expires=301)
    assert query(signer(expires=60)(new_session_id()))["X-Amz-Expires"] == "60"


# --- (2) the local web server ---------------------------------------------------------------------


@contextlib.contextmanager
def running(server: WebServer) -> Iterator[WebServer]:
    thread = threading.Thread(target=server.serve_forever, name="chat-web", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_web_server_serves_the_page_and_a_new_presigned_url_per_request(env_credentials: None) -> None:
    with running(WebServer(signer())) as server, httpx.Client(base_url=server.url, trust_env=False) as http:
        page = http.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert '<script src="/web/app.js">' in page.text
        script = http.get("/web/app.js")
        assert script.status_code == 200 and "/ws-url" in script.text
        assert http.get("/web/secret.py").status_code == 404 and http.get("/nothing").status_code == 404

        first, second = http.get("/ws-url"), http.get("/ws-url")
        assert first.status_code == second.status_code == 200
        assert first.headers["cache-control"] == "no-store"
        a, b = first.json(), second.json()
        assert a["expires_in"] == MAX_EXPIRES_S
        assert a["url"] != b["url"] and a["session_id"] != b["session_id"]
        for body in (a, b):
            assert body["url"].startswith(f"wss://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/"
                                          f"{quote(ARN, safe='')}/ws?")
            assert query(body["url"])[SESSION_HEADER] == body["session_id"]
            assert sigv4_valid(body["url"], SECRET)

        # A reconnection passes its session back: the same runtime session, a newly signed URL.
        next_second()
        renewed = http.get("/ws-url", params={"session": a["session_id"]}).json()
        assert renewed["session_id"] == a["session_id"] and renewed["url"] != a["url"]
        assert query(renewed["url"])["X-Amz-Date"] > query(a["url"])["X-Amz-Date"]
        assert server.signed == 3

        assert http.get("/ws-url", params={"session": "short"}).status_code == 400
        # Only the page itself may ask: other Host headers (DNS rebinding) and cross-site fetches get nothing.
        assert http.get("/ws-url", headers={"Host": f"evil.example:{server.port}"}).status_code == 403
        assert http.get("/ws-url", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert http.get("/ws-url", headers={"Host": f"localhost:{server.port}"}).status_code == 200
        assert server.signed == 4


def test_web_server_reports_missing_credentials(env_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    unsigned = signer()
    with running(WebServer(unsigned)) as server:
        answer = httpx.get(f"{server.url}ws-url", trust_env=False)
    assert answer.status_code == 503 and "No usable AWS credentials" in answer.json()["error"]
    assert server.signed == 0


runner = CliRunner()


def test_chat_web_serves_urls_for_the_deployed_runtime(aws: Any) -> None:
    """The command itself: the runtime ARN from the stack (moto), then serving until SIGINT."""
    # A runtime ARN as AgentCore writes it (moto's differs; the SDK checks the format).
    runtime_id = deploy_agent_runtime(runtime_id="kokoro_voice_agent-AbC123xYz")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", "from cli.deploy_agent import main; main()", "chat", "--web", "--no-open",
         "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        def up() -> bool:
            if process.poll() is not None:
                return True
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"http://127.0.0.1:{port}/", timeout=2, trust_env=False).status_code == 200
            return False

        assert wait_until(up, timeout=30)
        assert process.poll() is None, process.communicate()
        body = httpx.get(f"http://127.0.0.1:{port}/ws-url", trust_env=False).json()
        parts = urlsplit(body["url"])
        assert parts.netloc == "bedrock-agentcore.us-east-1.amazonaws.com"
        assert parts.path.startswith("/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A")
        assert parts.path.endswith(f"%3Aruntime%2F{runtime_id}/ws")
        assert query(body["url"])["X-Amz-Credential"].startswith("testing/")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
    assert process.returncode == 0, err
    assert f"Voice agent page: http://127.0.0.1:{port}/" in err and "presigned URLs, 300 s each" in err


def test_chat_web_refuses_terminal_only_options(aws: Any) -> None:
    result = runner.invoke(deploy_agent.app, ["chat", "--web", "Hello", "--save", "out.wav"])
    assert result.exit_code == 1
    assert "--web does not take a prompt, --save" in result.output


def test_chat_web_without_the_agent_stack_fails_clearly(aws: Any) -> None:
    result = runner.invoke(deploy_agent.app, ["chat", "--web", "--no-open", "--port", "0"])
    assert result.exit_code == 1 and "KokoroAgentRuntime" in result.output


# --- (3) the page in Chromium: asks /ws-url, then talks to what it was given ------------------------


class CountingLocalUrls:
    """The injected URL provider: a local agent's /ws, numbered per request (as a signer would sign)."""

    expires_s = None

    def __init__(self, ws_url: str) -> None:
        self.ws_url = ws_url
        self.sessions: list[str] = []

    def __call__(self, session_id: str) -> str:
        self.sessions.append(session_id)
        return f"{self.ws_url}?conn={len(self.sessions)}"


def test_page_asks_for_a_url_before_each_connection_and_streams_text(browser: Any) -> None:
    tts = os.environ.get("AGENT_TEST_TTS_URL")  # optional: with a Kokoro server, speech too
    with serve_agent(tts_url=tts, page=False) as agent:  # the agent serves no page: ours does
        urls = CountingLocalUrls(agent.ws_url)
        with running(WebServer(urls)) as server:
            page = browser.new_page()
            seen: list[tuple[str, str]] = []
            page.on("request", lambda request: seen.append(("http", request.url)))
            page.on("websocket", lambda socket: seen.append(("ws", socket.url)))
            try:
                page.goto(server.url)
                page.wait_for_function("() => window.__voiceStats && window.__voiceStats.state === 'idle'",
                                       timeout=15_000)
                sockets = [url for kind, url in seen if kind == "ws"]
                assert sockets == [f"{agent.ws_url}?conn=1"]
                first_ws = seen.index(("ws", sockets[0]))
                assert ("http", f"{server.url}ws-url") in seen[:first_ws]
                assert "Offline mode" in page.inner_text("#offline")

                page.fill("#prompt", "What can you do?")
                page.click("#send")
                page.wait_for_function("() => window.__voiceStats.events.includes('end')", timeout=30_000)
                final = stats(page)
                assert page.inner_text("#answer") == ANSWER == final["text"] and final["errors"] == []
                if tts:
                    assert final["chunks"] > 0

                # The socket drops (e.g. the runtime closed it): the page asks again, with its session.
                with page.expect_websocket(timeout=15_000) as reconnected:
                    page.evaluate("() => ws.close()")
                assert reconnected.value.url == f"{agent.ws_url}?conn=2"
                page.wait_for_function("() => window.__voiceStats.state === 'idle'", timeout=15_000)
                assert len(urls.sessions) == 2 and urls.sessions[1] == urls.sessions[0]
                assert ("http", f"{server.url}ws-url?session={urls.sessions[0]}") in seen

                page.fill("#prompt", "And again?")
                page.click("#send")
                page.wait_for_function("() => window.__voiceStats.events.includes('end')", timeout=30_000)
                assert page.inner_text("#answer") == ANSWER
            finally:
                page.close()
        assert wait_until(agent.idle), agent.running()


def test_page_served_by_the_agent_still_uses_same_origin_ws(browser: Any) -> None:
    with serve_agent(tts_url=None, page=True) as agent:
        page = browser.new_page()
        sockets: list[str] = []
        page.on("websocket", lambda socket: sockets.append(socket.url))
        try:
            page.goto(f"{agent.url}/")
            page.wait_for_function("() => window.__voiceStats && window.__voiceStats.state === 'idle'",
                                   timeout=15_000)
            assert sockets == [agent.ws_url]  # /ws-url answered 404 there
            page.fill("#prompt", "Hello?")
            page.click("#send")
            page.wait_for_function("() => window.__voiceStats.events.includes('end')", timeout=30_000)
            assert page.inner_text("#answer") == ANSWER
        finally:
            page.close()


def test_local_agent_url_provider() -> None:
    assert LocalAgentUrl("http://127.0.0.1:8090/")("x") == "ws://127.0.0.1:8090/ws"
    assert LocalAgentUrl("https://agent.example")("x") == "wss://agent.example/ws"
