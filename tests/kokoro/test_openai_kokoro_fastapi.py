"""Kokoro-FastAPI's clients on the OpenAI route: the extra fields they send mean what they mean there.

Bodies are what Kokoro-FastAPI's own docs and web page post to ``/v1/audio/speech`` (``stream``,
``volume_multiplier``, ``normalization_options``, ``return_download_link``, ``download_format``),
sent by the ``openai`` package's ``extra_body`` and by plain HTTP, against the real server.
"""

from __future__ import annotations

import io
import struct
import wave

import av
import httpx
import numpy as np
import openai
import pytest
from kokoro_harness import Server

pytestmark = pytest.mark.kokoro

TEXT = "Visit https://example.com/docs for the file(s). It takes 5 km."
BASE = {"model": "kokoro", "voice": "af_heart", "input": TEXT, "response_format": "pcm"}
# What Kokoro-FastAPI's web page sends with every request (its defaults), less lang_code.
KFA_DEFAULTS = {"download_format": "mp3", "stream": True, "return_download_link": False,
                "normalization_options": {"normalize": True, "unit_normalization": False, "url_normalization": True,
                                          "email_normalization": True,
                                          "optional_pluralization_normalization": True,
                                          "phone_normalization": True, "replace_remaining_symbols": True}}


def speech(server: Server, body: dict[str, object]) -> httpx.Response:
    response = httpx.post(f"{server.http}/v1/audio/speech", json=body, timeout=120)
    return response


def pcm(server: Server, **extra: object) -> np.ndarray:
    response = speech(server, {**BASE, **extra})
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, dtype="<i2")


def test_kokoro_fastapis_web_page_body_is_served(server: Server) -> None:
    """Its defaults: units left as written (unit_normalization false), the rest read."""
    with httpx.stream("POST", f"{server.http}/v1/audio/speech", json={**BASE, **KFA_DEFAULTS}, timeout=120) as answer:
        assert answer.status_code == 200
        assert answer.headers["x-kokoro-ignored-fields"] == "download_format"
        streamed = b"".join(answer.iter_bytes())
    assert np.array_equal(np.frombuffer(streamed, dtype="<i2"), pcm(server, normalize={"units": False}))


def test_the_openai_package_passes_them_as_extra_body(server: Server) -> None:
    client = openai.OpenAI(base_url=f"{server.http}/v1", api_key="unused", max_retries=0, timeout=120)
    audio = client.audio.speech.create(model="kokoro", voice="af_heart", input=TEXT, response_format="pcm",
                                       extra_body={"stream": True, "volume_multiplier": 0.5}).content
    half, whole = np.frombuffer(audio, dtype="<i2").astype(int), pcm(server).astype(int)
    assert half.size == whole.size and np.abs(half - whole / 2).max() <= 1  # each sample scaled by 0.5


def test_each_normalization_switch_is_its_group(server: Server) -> None:
    assert np.array_equal(pcm(server, normalization_options={"url_normalization": False}),
                          pcm(server, normalize={"urls": False}))
    assert np.array_equal(pcm(server, normalization_options={"optional_pluralization_normalization": False}),
                          pcm(server, normalize={"plurals": False}))
    assert np.array_equal(pcm(server, normalization_options={"normalize": False, "url_normalization": True}),
                          pcm(server, normalize=False))
    assert not np.array_equal(pcm(server, normalize=False), pcm(server))


def test_stream_false_answers_with_one_whole_file(server: Server) -> None:
    answer = speech(server, {**BASE, "response_format": "wav", "stream": False})
    assert answer.status_code == 200 and int(answer.headers["content-length"]) == len(answer.content)
    riff_size, data_size = struct.unpack("<I", answer.content[4:8])[0], struct.unpack("<I", answer.content[40:44])[0]
    assert (riff_size, data_size) == (len(answer.content) - 8, len(answer.content) - 44)
    with wave.open(io.BytesIO(answer.content)) as wav:
        frames = wav.readframes(wav.getnframes())
        assert wav.getframerate() == 24000 and wav.getnframes() * 2 == len(frames)
    assert np.array_equal(np.frombuffer(frames, dtype="<i2"), pcm(server))
    mp3 = speech(server, {**BASE, "response_format": "mp3", "stream": False})
    with av.open(io.BytesIO(mp3.content), mode="r") as container:
        seconds = sum(frame.samples for frame in container.decode(audio=0)) / 24000
    assert abs(seconds - len(frames) / 2 / 24000) < 0.1


def test_a_download_link_is_not_made_and_the_response_says_so(server: Server) -> None:
    answer = speech(server, {**BASE, "return_download_link": True, "download_format": "wav"})
    assert answer.status_code == 200 and answer.content
    assert answer.headers["x-kokoro-ignored-fields"] == "return_download_link, download_format"


BAD = [
    ({"stream": "yes"}, "stream", "invalid_type"),
    ({"stream": False, "stream_format": "sse"}, "stream", "invalid_value"),
    ({"volume_multiplier": -1}, "volume_multiplier", "invalid_value"),
    ({"volume_multiplier": "loud"}, "volume_multiplier", "invalid_value"),
    ({"normalization_options": {"bogus_normalization": True}}, "normalization_options.bogus_normalization",
     "unknown_parameter"),
    ({"normalization_options": {"url_normalization": "no"}}, "normalization_options.url_normalization",
     "invalid_type"),
    ({"normalization_options": []}, "normalization_options", "invalid_type"),
    ({"download_format": "ogg"}, "download_format", "invalid_value"),
    ({"return_download_link": 1}, "return_download_link", "invalid_type"),
]


@pytest.mark.parametrize(("change", "param", "code"), BAD, ids=[f"{b[1]}-{b[2]}" for b in BAD])
def test_a_bad_value_is_refused_naming_its_field(
    server: Server, change: dict[str, object], param: str, code: str
) -> None:
    answer = speech(server, {**BASE, **change})
    error = answer.json()["error"]
    assert answer.status_code == 400 and (error["param"], error["code"]) == (param, code)
    assert error["message"].startswith(param)
