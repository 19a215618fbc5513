"""A Bedrock refusal in a session names its cause in one line: the Marketplace subscription.

Bedrock's first call to a third-party model subscribes the account, and calls may succeed for up
to 15 minutes before that subscription fails (Bedrock user guide, "Request access to models").
The agent here is the real app with its real Bedrock model (strands' BedrockModel, boto3); only
Bedrock itself is a stand-in: a local HTTP server answering ConverseStream the way Bedrock's
REST-JSON protocol carries an error (status 403, ``x-amzn-ErrorType``, a JSON ``message``), so
botocore parses it exactly as it parses AWS's answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import uvicorn
from agent_harness import free_port
from agent_wire import sse_turn
from waiting import wait_until

from voice_agent.app import create_app
from voice_agent.config import AgentConfig

MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
MARKETPLACE = ("Model access is denied due to IAM user or service role is not authorized to perform the required "
               "AWS Marketplace actions (aws-marketplace:ViewSubscriptions, aws-marketplace:Subscribe) to enable "
               "access to this model.")


def bedrock_refusing(code: str, message: str, status: int) -> Iterator[str]:
    """A ConverseStream endpoint that answers every call with ``code``; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"message": message}).encode()
            self.send_response(status)
            self.send_header("x-amzn-ErrorType", f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(10)


def _turn_errors(monkeypatch: pytest.MonkeyPatch, bedrock_url: str) -> list[dict[str, object]]:
    """One SSE turn of the real app with AGENT_MODEL=bedrock, its boto3 client sent to ``bedrock_url``."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": bedrock_url, "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    config = AgentConfig(model="bedrock", model_id=MODEL, region="us-east-1", tts_url=None, max_prompt_chars=500)
    server = uvicorn.Server(uvicorn.Config(create_app(config=config, use_config_tts=False), host="127.0.0.1",
                                           port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started or not thread.is_alive(), timeout=30) and server.started
        log = sse_turn(f"http://127.0.0.1:{server.config.port}", {"prompt": "Hello?", "mode": "batch"})
    finally:
        server.should_exit = True
        thread.join(15)
    return log.of("error")


@pytest.fixture
def refusing_subscription() -> Iterator[str]:
    yield from bedrock_refusing("AccessDeniedException", MARKETPLACE, 403)


@pytest.fixture
def invalid_model() -> Iterator[str]:
    yield from bedrock_refusing("ValidationException", "The provided model identifier is invalid.", 400)


def test_an_access_refusal_names_the_subscription_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                              refusing_subscription: str) -> None:
    (error,) = _turn_errors(monkeypatch, refusing_subscription)
    message = str(error["message"])
    assert error["code"] == "model_error" and "\n" not in message
    assert message.startswith(f"Bedrock refused {MODEL} (AccessDeniedException): the account's AWS Marketplace "
                              "subscription to this model is missing or failed")
    assert "up to 15 minutes" in message and "deploy-agent deploy" in message


def test_a_refusal_that_is_not_about_access_is_not_blamed_on_the_subscription(monkeypatch: pytest.MonkeyPatch,
                                                                               invalid_model: str) -> None:
    (error,) = _turn_errors(monkeypatch, invalid_model)
    assert error["code"] == "model_error" and "Marketplace" not in str(error["message"])
    assert "ValidationException" in str(error["message"]) and "model identifier is invalid" in str(error["message"])
