"""What OpenAI's clients and the frameworks built on them read besides the audio (issue 30):
``x-request-id`` on every response, through the real openai package."""

from __future__ import annotations

import httpx
import pytest
from openai import OpenAI

pytestmark = pytest.mark.kokoro


def test_every_response_carries_a_request_id_the_openai_client_reads(server) -> None:
    client = OpenAI(base_url=f"{server.http}/v1", api_key="unused", max_retries=0)
    raw = client.audio.speech.with_raw_response.create(model="tts-1", voice="alloy", input="Hi.",
                                                      response_format="pcm")
    assert raw.headers["x-request-id"].startswith("req_") and raw.request_id == raw.headers["x-request-id"]
    again = client.audio.speech.with_raw_response.create(model="tts-1", voice="alloy", input="Hi.",
                                                        response_format="pcm")
    assert again.request_id != raw.request_id
    refused = httpx.post(f"{server.http}/v1/audio/speech", json={"model": "tts-1", "voice": "alloy"}, timeout=30)
    assert refused.status_code == 400 and refused.headers["x-request-id"].startswith("req_")


def test_a_callers_request_id_is_kept(server) -> None:
    answer = httpx.get(f"{server.http}/ping", headers={"x-request-id": "trace-123"}, timeout=10)
    assert answer.headers["x-request-id"] == "trace-123"
    odd = httpx.get(f"{server.http}/ping", headers={"x-request-id": "has space"}, timeout=10)
    assert odd.headers["x-request-id"].startswith("req_")
