"""OpenAI's speech API, driven by the official ``openai`` package against the real server.

The client is ``AsyncOpenAI(base_url=...)`` exactly as LiveKit agents, pipecat or Open WebUI would
configure it for a self-hosted TTS; nothing here builds HTTP by hand except where OpenAI's SDK
has no method (the voice list) or where the point is the same body through ``/invocations``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

import av
import httpx
import openai
import pytest
from kokoro_harness import Server

pytestmark = pytest.mark.kokoro

TEXT = "Hello there. This is the second sentence! And a third one?"


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def client(server: Server) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.http}/v1", api_key="not-needed", max_retries=0, timeout=120)


async def stream(server: Server, **params: Any) -> tuple[Mapping[str, str], list[bytes]]:
    async with client(server) as api:
        async with api.audio.speech.with_streaming_response.create(**params) as response:
            return response.headers, [chunk async for chunk in response.iter_bytes()]


def native_pcm(server: Server, text: str = TEXT, voice: str = "af_heart") -> bytes:
    response = httpx.post(f"{server.http}/invocations", json={"text": text, "voice": voice}, timeout=120)
    assert response.status_code == 200
    return response.content


def decoded_seconds(data: bytes) -> float:
    with av.open(io.BytesIO(data), mode="r") as container:
        stream_ = container.streams.audio[0]
        return sum(frame.samples for frame in container.decode(audio=0)) / stream_.rate


def test_pcm_streams_the_same_audio_as_the_native_route(server: Server) -> None:
    headers, chunks = run(stream(server, model="kokoro", voice="af_heart", input=TEXT, response_format="pcm"))
    assert headers["content-type"] == "audio/pcm" and headers["x-kokoro-voice"] == "af_heart"
    assert headers.get("transfer-encoding") == "chunked"  # streamed as made, no length known up front
    assert b"".join(chunks) == native_pcm(server)  # OpenAI's pcm: 24 kHz s16le mono; the tiny model is deterministic


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav"])
def test_every_response_format_decodes_to_the_whole_text(server: Server, fmt: str) -> None:
    expected_s = len(native_pcm(server)) / 2 / 24_000
    headers, chunks = run(stream(server, model="tts-1", voice="af_heart", input=TEXT, response_format=fmt))
    assert decoded_seconds(b"".join(chunks)) == pytest.approx(expected_s, abs=0.12)


def test_mp3_is_the_default_and_openai_voice_names_speak_with_the_default_voice(server: Server) -> None:
    async def scenario() -> tuple[Mapping[str, str], bytes]:
        async with client(server) as api:
            response = await api.audio.speech.create(model="gpt-4o-mini-tts", voice="alloy", input="Short one.")
            return response.response.headers, response.content
    headers, data = run(scenario())
    assert headers["content-type"] == "audio/mpeg"
    default = httpx.get(f"{server.http}/v1/audio/voices", timeout=10).json()["default"]
    assert headers["x-kokoro-voice"] == default
    assert decoded_seconds(data) > 0.2


def test_instructions_are_accepted_ignored_and_said_so(server: Server) -> None:
    plain, chunks = run(stream(server, model="kokoro", voice="af_heart", input="Short one.", response_format="pcm"))
    told, told_chunks = run(stream(server, model="kokoro", voice="af_heart", input="Short one.", response_format="pcm",
                                   instructions="Speak like a pirate."))
    assert told["x-kokoro-ignored-fields"] == "instructions" and "x-kokoro-ignored-fields" not in plain
    assert b"".join(told_chunks) == b"".join(chunks)


def test_sse_stream_format_sends_openai_delta_and_done_events(server: Server) -> None:
    headers, chunks = run(stream(server, model="kokoro", voice="af_heart", input=TEXT, response_format="pcm",
                                 stream_format="sse"))
    assert headers["content-type"].startswith("text/event-stream")
    events = [json.loads(block.removeprefix("data: ")) for block in b"".join(chunks).decode().strip().split("\n\n")]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) >= 3
    done = events[-1]
    assert done["type"] == "speech.audio.done"
    assert done["usage"]["input_tokens"] == len(TEXT)
    assert done["usage"]["total_tokens"] == done["usage"]["input_tokens"] + done["usage"]["output_tokens"]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert audio == native_pcm(server)


def test_a_blend_speaks_between_its_voices(server: Server) -> None:
    headers, chunks = run(stream(server, model="kokoro", voice="af_heart(2)+am_michael(1)", input="Short one.",
                                 response_format="pcm"))
    assert headers["x-kokoro-voice"] == "af_heart(0.6667)+am_michael(0.3333)"
    blend = b"".join(chunks)
    assert blend and blend != native_pcm(server, "Short one.", "af_heart")
    assert blend != native_pcm(server, "Short one.", "am_michael")


BAD = [
    ({"voice": "nobody"}, 400, "voice", "unknown_voice", "nobody"),
    ({"voice": "af_heart+nobody"}, 400, "voice", "unknown_voice", "nobody"),
    ({"voice": "af_heart(0)+am_michael"}, 400, "voice", "invalid_field", "weight"),
    ({"voice": "af_heart(x)"}, 400, "voice", "invalid_field", "weight"),
    ({"voice": "af_heart)("}, 400, "voice", "invalid_field", "cannot read"),
    ({"speed": 4.5}, 400, "speed", "invalid_field", "between 0.25 and 4.0"),
    ({"speed": 0.2}, 400, "speed", "invalid_field", "between 0.25 and 4.0"),
    ({"input": "   "}, 400, "input", "invalid_field", "empty"),
    ({"response_format": "ogg"}, 400, "response_format", "invalid_value", "mp3"),
    ({"stream_format": "chunks"}, 400, "stream_format", "invalid_value", "sse"),
    ({"model": "whisper-1"}, 404, "model", "model_not_found", "kokoro"),
]


@pytest.mark.parametrize(("change", "status", "param", "code", "says"), BAD, ids=[b[2] + "-" + b[3] for b in BAD])
def test_bad_requests_get_openais_error_body_naming_the_param(
    server: Server, change: dict[str, Any], status: int, param: str, code: str, says: str
) -> None:
    params = {"model": "kokoro", "voice": "af_heart", "input": "Hi.", **change}

    async def scenario() -> None:
        async with client(server) as api:
            await api.audio.speech.create(**params)
    with pytest.raises(openai.APIStatusError) as caught:
        run(scenario())
    error = caught.value.response.json()["error"]
    assert caught.value.status_code == status
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")
    assert says in error["message"]


def test_a_field_openai_does_not_define_is_refused(server: Server) -> None:
    async def scenario() -> None:
        async with client(server) as api:
            await api.audio.speech.create(model="kokoro", voice="af_heart", input="Hi.", extra_body={"pitch": 2})
    with pytest.raises(openai.BadRequestError) as caught:
        run(scenario())
    assert caught.value.response.json()["error"]["param"] == "pitch"


def test_models_and_voices_are_listed(server: Server) -> None:
    async def scenario() -> list[str]:
        async with client(server) as api:
            return [model.id async for model in api.models.list()]
    assert {"kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"} <= set(run(scenario()))
    voices = httpx.get(f"{server.http}/v1/audio/voices", timeout=10).json()
    assert {"af_heart", "am_michael"} <= set(voices["voices"])
    # the example blend names voices this directory has (the tiny model's two)
    assert voices["blends"]["accepted"] is True and "e.g. af_heart(2)+am_michael(1)" in voices["blends"]["syntax"]


def test_invocations_accepts_the_openai_body_for_sagemaker(server: Server) -> None:
    body = {"model": "tts-1", "input": TEXT, "voice": "af_heart", "response_format": "pcm"}
    response = httpx.post(f"{server.http}/invocations", json=body, timeout=120)
    assert response.status_code == 200 and response.headers["x-kokoro-voice"] == "af_heart"
    assert response.content == native_pcm(server)
    refused = httpx.post(f"{server.http}/invocations", json={**body, "speed": 9}, timeout=30)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "speed"


def test_the_readme_snippet_runs_as_written(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    snippet = next(block for block in readme.split("```python\n")[1:] if "AsyncOpenAI" in block).split("```")[0]
    assert 'base_url="http://127.0.0.1:8080/v1"' in snippet
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet.replace("http://127.0.0.1:8080", server.http), "README.md", "exec"), {})
    assert decoded_seconds((tmp_path / "hello.wav").read_bytes()) > 0.3
