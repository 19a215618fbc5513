"""What OpenAI's clients and the frameworks built on them rely on besides the audio, through the
real openai package: ``x-request-id`` on every response, OpenAI's whole ``speed`` range (0.25-4.0),
and ``GET /v1/models/{id}``."""

from __future__ import annotations

import httpx
import pytest
from kokoro_harness import Server
from openai import OpenAI

pytestmark = pytest.mark.kokoro


def test_every_response_carries_a_request_id_the_openai_client_reads(server: Server) -> None:
    client = OpenAI(base_url=f"{server.http}/v1", api_key="unused", max_retries=0)
    raw = client.audio.speech.with_raw_response.create(model="tts-1", voice="alloy", input="Hi.",
                                                      response_format="pcm")
    assert raw.headers["x-request-id"].startswith("req_") and raw.request_id == raw.headers["x-request-id"]
    again = client.audio.speech.with_raw_response.create(model="tts-1", voice="alloy", input="Hi.",
                                                        response_format="pcm")
    assert again.request_id != raw.request_id
    refused = httpx.post(f"{server.http}/v1/audio/speech", json={"model": "tts-1", "voice": "alloy"}, timeout=30)
    assert refused.status_code == 400 and refused.headers["x-request-id"].startswith("req_")


def test_a_callers_request_id_is_kept(server: Server) -> None:
    answer = httpx.get(f"{server.http}/ping", headers={"x-request-id": "trace-123"}, timeout=10)
    assert answer.headers["x-request-id"] == "trace-123"
    odd = httpx.get(f"{server.http}/ping", headers={"x-request-id": "has space"}, timeout=10)
    assert odd.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize("speed", [0.25, 4.0])
def test_openais_whole_speed_range_is_spoken(server: Server, speed: float) -> None:
    """Outside Kokoro's own 0.5-2.0 too: passed to the model (bench/results/speeds.json: what a
    listener then hears)."""
    client = OpenAI(base_url=f"{server.http}/v1", api_key="unused", max_retries=0)
    normal = client.audio.speech.create(model="tts-1", voice="alloy", input="One two three four.",
                                        response_format="pcm").content
    changed = client.audio.speech.create(model="tts-1", voice="alloy", input="One two three four.",
                                         response_format="pcm", speed=speed).content
    assert (len(changed) > 2 * len(normal)) if speed < 1 else (0 < len(changed) < len(normal))


def test_each_model_can_be_retrieved_and_an_unknown_one_is_openais_404(server: Server) -> None:
    client = OpenAI(base_url=f"{server.http}/v1", api_key="unused", max_retries=0)
    listed = [m.id for m in client.models.list()]
    assert "tts-1" in listed and "gpt-4o-mini-tts" in listed and "kokoro" in listed
    for name in listed:
        assert client.models.retrieve(name).id == name
    missing = httpx.get(f"{server.http}/v1/models/whisper-1", timeout=10)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "model_not_found" and missing.json()["error"]["param"] == "model"


def test_a_route_that_names_its_request_keeps_its_own_id(server: Server) -> None:
    """The AWS sample's shape answers with its request_id; no second x-request-id is added."""
    answer = httpx.post(f"{server.http}/invocations", timeout=60,
                        json={"text": "Hi.", "request_id": "sample-7", "stream": False})
    assert answer.status_code == 200 and answer.headers.get_list("x-request-id") == ["sample-7"]
