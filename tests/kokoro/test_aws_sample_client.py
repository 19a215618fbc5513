"""Every payload the AWS sample's client sends, replayed against the real server.

The payloads are written here from the sample client's documented shapes (its README and the
summary in /work/shared/README.md: every body carries ``request_timestamp``; ``sample_rate`` when
set; ``format`` wav (RIFF expected) or mp3; SSE callers add ``transport`` and ``request_id``;
``stream: false`` for one file), never from its code. Each test asserts what that client reads
back: the RIFF header's rate and length, the status codes it classifies (408 -> RequestStale),
the SSE events it parses, the WebSocket frames it waits for and the tokens it looks for in an
error's message.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import struct
import time
from collections.abc import Callable
from typing import Any

import av
import httpx
import pytest
from kokoro_harness import Server
from wsclient import audio_bytes, collect, connect, of_type, send, sse_events

pytestmark = pytest.mark.kokoro

TEXT = "Hello from the sample client. It expects a RIFF header first!"


def post(server: Server, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.http}/invocations", content=json.dumps(body), timeout=120,
                      headers={"Content-Type": "application/json", "Accept": "audio/wav"})


def sample_body(**extra: Any) -> dict[str, Any]:
    """What the sample's TTSClient.synthesize sends (it stamps request_timestamp at send time)."""
    return {"text": TEXT, "voice": "af_heart", "speed": 1.0, "format": "wav", "request_timestamp": time.time(),
            **extra}


def riff(data: bytes) -> tuple[int, float]:
    """(sample rate, seconds) as the sample's client reads them: header bytes 24..28, data after 44."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    rate = struct.unpack_from("<I", data, 24)[0]
    return rate, (len(data) - 44) / (rate * 2)



# ---- POST /invocations ---------------------------------------------------------------------------

def test_synthesize_streams_a_wav_the_client_can_read(server: Server) -> None:
    response = post(server, sample_body())
    assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
    rate, seconds = riff(response.content)
    native = httpx.post(f"{server.http}/invocations", json={"text": TEXT, "voice": "af_heart"}, timeout=120).content
    assert rate == 24_000 and seconds == pytest.approx(len(native) / 48_000, abs=1e-6)


def test_sample_rate_is_honoured_and_in_the_header(server: Server) -> None:
    rate, seconds = riff(post(server, sample_body(sample_rate=16_000)).content)
    full_rate, full_seconds = riff(post(server, sample_body()).content)
    assert rate == 16_000 and seconds == pytest.approx(full_seconds, abs=0.01)


def test_mp3_streams_decodable_frames(server: Server) -> None:
    response = post(server, sample_body(format="mp3"))
    assert response.status_code == 200 and response.headers["content-type"] == "audio/mpeg"
    with av.open(io.BytesIO(response.content), mode="r") as container:
        assert sum(f.samples for f in container.decode(audio=0)) > 0


@pytest.mark.parametrize("age_s", [57.0, 3600.0])
def test_a_stale_request_gets_408_with_the_request_stale_token(server: Server, age_s: float) -> None:
    response = post(server, sample_body(request_timestamp=time.time() - age_s))
    assert response.status_code == 408
    error = response.json()["error"]
    assert "request_stale" in error["message"] and error["field"] == "request_timestamp"


def test_a_request_just_inside_the_age_limit_is_served(server: Server) -> None:
    assert post(server, sample_body(request_timestamp=time.time() - 50)).status_code == 200


@pytest.mark.parametrize("fmt", ["wav", "mp3"])
def test_stream_false_is_one_complete_file_with_the_samples_headers(server: Server, fmt: str) -> None:
    response = post(server, sample_body(stream=False, format=fmt, request_id="one-shot"))
    assert response.status_code == 200 and response.headers["x-request-id"] == "one-shot"
    assert int(response.headers["content-length"]) == len(response.content)  # not chunked: one file
    duration = float(response.headers["x-audio-duration"])
    assert response.headers["x-characters-processed"] == str(len(TEXT))
    assert int(response.headers["x-inference-time-ms"]) >= 0 and float(response.headers["x-rtf"]) > 0
    if fmt == "wav":
        data = response.content
        assert struct.unpack_from("<I", data, 4)[0] == len(data) - 8  # real RIFF sizes, not 0xFFFFFFFF
        assert struct.unpack_from("<I", data, 40)[0] == len(data) - 44
        assert riff(data)[1] == pytest.approx(duration, abs=0.001)
    with av.open(io.BytesIO(response.content), mode="r") as container:
        decoded = sum(f.samples for f in container.decode(audio=0)) / 24_000
    assert decoded == pytest.approx(duration, abs=0.12)


def test_sse_requests_get_the_samples_events_with_the_request_id(server: Server) -> None:
    body = sample_body(format="mp3", transport="sse", request_id="req-42")
    events = sse_events(post(server, body).text)
    names = [name for name, _ in events]
    assert names[0] == "audio_stream_start" and names[-1] == "audio_stream_end"
    assert set(names[1:-1]) == {"audio_chunk"} and len(names) >= 3
    assert all(data["request_id"] == "req-42" for _, data in events)
    start, end = events[0][1], events[-1][1]
    assert (start["format"], start["sample_rate"], start["voice"]) == ("mp3", 24_000, "af_heart")
    chunks = [data for name, data in events if name == "audio_chunk"]
    assert [c["seq"] for c in chunks] == list(range(len(chunks))) and end["total_chunks"] == len(chunks)
    audio = b"".join(base64.b64decode(c["data"]) for c in chunks)
    with av.open(io.BytesIO(audio), mode="r") as container:
        decoded = sum(f.samples for f in container.decode(audio=0)) / 24_000
    assert end["duration_s"] == pytest.approx(decoded, abs=0.12)


@pytest.mark.parametrize(("change", "field"), [
    ({"pitch": 2}, "pitch"),
    ({"request_timestamp": "yesterday"}, "request_timestamp"),
    ({"stream": "no"}, "stream"),
    ({"format": "ogg"}, "format"),
    ({"request_id": ""}, "request_id"),
])
def test_fields_outside_the_samples_shape_or_bad_values_are_refused(
    server: Server, change: dict[str, Any], field: str
) -> None:
    response = post(server, sample_body(**change))
    assert response.status_code == 400 and response.json()["error"]["field"] == field


def test_outside_the_samples_shape_unknown_fields_stay_refused(server: Server) -> None:
    response = post(server, {"text": "Hi.", "pitch": 2})
    assert response.status_code == 400 and response.json()["error"]["field"] == "pitch"


# ---- WS /invocations-bidirectional-stream --------------------------------------------------------

def ws_message(**extra: Any) -> dict[str, Any]:
    """What the sample's bidi transport sends per text (request_timestamp always; sample_rate when set)."""
    return {"text": TEXT, "voice": "af_heart", "request_timestamp": time.time(), **extra}


async def ws_exchange(
    server: Server, *messages: dict[str, Any], until: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    async with connect(server.ws) as ws:
        for message in messages:
            await send(ws, message, binary=True)  # SageMaker forwards payload parts as binary frames
        events = await collect(ws, until)
        await send(ws, {"type": "close"})
        return events


def test_ws_request_gets_start_pcm_and_complete_with_the_samples_fields(server: Server) -> None:
    events = asyncio.run(ws_exchange(server, ws_message(request_id="w1"), until=of_type("synthesis_complete")))
    assert events[0] == {"type": "synthesis_start", "request_id": "w1"}
    complete = events[-1]
    pcm = audio_bytes(events)
    assert complete["request_id"] == "w1"
    assert complete["total_duration_s"] == pytest.approx(len(pcm) / 48_000, abs=0.002)
    assert 0 < complete["elapsed_s"] < 120


def test_ws_sample_rate_is_per_request(server: Server) -> None:
    events = asyncio.run(ws_exchange(
        server, ws_message(request_id="a", sample_rate=16_000), ws_message(request_id="b"),
        until=of_type("synthesis_complete", request_id="b"),
    ))
    completes = {e["request_id"]: e for e in events if e["type"] == "synthesis_complete"}
    assert completes["a"]["sample_rate"] == 16_000 and completes["b"]["sample_rate"] == 24_000
    assert completes["a"]["total_duration_s"] == pytest.approx(completes["b"]["total_duration_s"], abs=0.01)
    assert completes["a"]["bytes"] == pytest.approx(completes["b"]["bytes"] * 2 / 3, rel=0.01)  # 16 vs 24 kHz


def test_ws_a_request_without_an_id_is_answered_under_one(server: Server) -> None:
    events = asyncio.run(ws_exchange(server, ws_message(), until=of_type("synthesis_complete")))
    assert events[0]["request_id"] == events[-1]["request_id"] and events[0]["request_id"].startswith("request-")


def test_ws_a_stale_request_is_an_error_with_its_id_and_the_token(server: Server) -> None:
    events = asyncio.run(ws_exchange(
        server, ws_message(request_id="old", request_timestamp=time.time() - 120), ws_message(request_id="fresh"),
        until=of_type("synthesis_complete", request_id="fresh"),
    ))
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["request_id"] == "old" and "request_stale" in error["message"]
    assert not [e for e in events if e.get("request_id") == "old" and e["type"] != "error"]


def test_ws_queue_full_is_an_error_with_the_token(server: Server) -> None:
    async def scenario() -> dict[str, Any]:
        async with connect(server.ws) as ws:
            for n in range(70):  # past KOKORO_MAX_QUEUED_UTTERANCES (64) before the first one ends
                await send(ws, ws_message(request_id=f"q{n}", text=f"Number {n}."), binary=True)
            (error,) = [e for e in await collect(ws, of_type("error")) if e["type"] == "error"]
            await send(ws, {"type": "cancel"})
            await collect(ws, of_type("cancelled"))
            return error
    error = asyncio.run(scenario())
    assert "queue_full" in error["message"] and error["request_id"].startswith("q")


@pytest.mark.parametrize(("change", "field"), [({"pitch": 2}, "pitch"),
                                               ({"request_timestamp": "now"}, "request_timestamp"),
                                               ({"sample_rate": 44}, "sample_rate")])
def test_ws_fields_outside_the_samples_shape_are_refused_with_its_id(
    server: Server, change: dict[str, Any], field: str
) -> None:
    events = asyncio.run(ws_exchange(server, ws_message(request_id="bad", **change), until=of_type("error")))
    assert events[-1]["request_id"] == "bad" and events[-1]["field"] == field
