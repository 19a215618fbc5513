"""``POST /invocations`` in the AWS sample's shape (aws-samples/sample-kokoro-tts-for-ai-agents).

The sample's client sends ``{"text", "voice", "speed", "format", "request_timestamp",
"sample_rate"?}``, and its SSE callers add ``transport: "sse"`` and ``request_id``; ``stream:
false`` asks for one complete file. A body holding any of ``request_timestamp``, ``request_id`` or
``stream`` is in that shape (none of them is a native field) and is answered as the sample's
server answers it:

* ``request_timestamp`` (epoch seconds) older than ``KOKORO_MAX_REQUEST_AGE_S`` (56): 408, the
  message holding ``request_stale`` (SageMaker hands the 408 to the client as ``OriginalStatusCode``);
* ``format`` defaults to ``wav`` (the sample's default), any of ours is accepted;
* ``stream: false``: one complete file (a WAV with its real RIFF sizes) and the headers
  ``X-Audio-Duration``, ``X-Inference-Time-Ms``, ``X-RTF``, ``X-Characters-Processed``;
* ``transport: "sse"``: the sample's events ``audio_stream_start``, ``audio_chunk {seq, data}``,
  ``audio_stream_end {total_chunks, duration_s}``, ``error``, each with ``request_id``;
* otherwise the audio streams as raw bytes, as in the native shape.

Fields outside the sample's set are refused, as in the native shape.
"""

from __future__ import annotations

import base64
import json
import math
import struct
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from voicestream.protocol import (
    NATIVE_SAMPLE_RATE, ProtocolError, SynthesisRequest, check_format, check_identifier, check_sample_rate,
    check_speed, check_text, check_transport,
)

from .audio import CONTENT_TYPES
from .invocations import check_audio, encoded_audio, error_response
from .synth import Synthesizer

FIELDS = frozenset({"text", "voice", "speed", "format", "sample_rate", "transport", "stream", "request_id",
                    "request_timestamp"})
MARKERS = ("request_timestamp", "request_id", "stream")  # no native request has them
STALE_STATUS = 408


@dataclass(frozen=True, kw_only=True)
class SampleRequest:
    """A validated request in the sample's shape."""

    request: SynthesisRequest
    stream: bool = True
    request_id: str | None = None
    request_timestamp: float | None = None


def sample_payload(body: bytes) -> dict[str, Any] | None:
    """The parsed body when it is in the sample's shape, else None (the native parser takes it)."""
    if not any(f'"{marker}"'.encode() in body for marker in MARKERS):
        return None
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) and any(m in payload for m in MARKERS) else None


def check_timestamp(value: object, *, now: float, max_age_s: float, name: str = "request_timestamp") -> float:
    """``value`` as epoch seconds; ProtocolError ``request_stale`` when older than ``max_age_s``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ProtocolError("invalid_field", f"{name}: must be epoch seconds (a number), got {value!r}", field=name)
    age = now - float(value)
    if age > max_age_s:
        raise ProtocolError(
            "request_stale",
            f"{name}: request_stale: sent {age:.1f} s ago, over the limit of {max_age_s:g} s (KOKORO_MAX_REQUEST_AGE_S)",
            field=name,
        )
    return float(value)


def parse_sample_request(payload: dict[str, Any], *, now: float, max_age_s: float) -> SampleRequest:
    unknown = sorted(set(payload) - FIELDS)
    if unknown:
        raise ProtocolError("invalid_field", f"{unknown[0]}: not a field of the request", field=unknown[0])
    stamp = None
    if "request_timestamp" in payload:  # first: a stale request is refused whatever else it holds
        stamp = check_timestamp(payload["request_timestamp"], now=now, max_age_s=max_age_s)
    if "text" not in payload:
        raise ProtocolError("invalid_field", "text: is required", field="text")
    stream = payload.get("stream", True)
    if not isinstance(stream, bool):
        raise ProtocolError("invalid_field", f"stream: must be true or false, got {stream!r}", field="stream")
    request = SynthesisRequest(
        text=check_text(payload["text"]),
        voice=check_identifier(payload["voice"], name="voice") if "voice" in payload else None,
        speed=check_speed(payload.get("speed", 1.0)),
        format=check_format(payload.get("format", "wav")),
        sample_rate=check_sample_rate(payload.get("sample_rate", NATIVE_SAMPLE_RATE)),
        transport=check_transport(payload.get("transport", "binary")),
    )
    request_id = check_identifier(payload["request_id"], name="request_id") if "request_id" in payload else None
    return SampleRequest(request=request, stream=stream, request_id=request_id, request_timestamp=stamp)


async def respond_sample(request: Request, synth: Synthesizer, payload: dict[str, Any]) -> Response:
    """Answer a body in the sample's shape (see the module docstring)."""
    try:
        sample = parse_sample_request(payload, now=time.time(), max_age_s=request.app.state.settings.max_request_age_s)
        voice = synth.resolve_voice(sample.request.voice)
        check_audio(sample.request)
    except ProtocolError as exc:
        return error_response(exc, STALE_STATUS if exc.code == "request_stale" else 400)
    req = sample.request
    request_id = sample.request_id or request.headers.get("x-amzn-requestid") or uuid.uuid4().hex
    headers = {"X-Request-Id": request_id, "X-Audio-Format": req.format, "X-Audio-Sample-Rate": str(req.sample_rate)}
    audio = encoded_audio(synth, req, voice)
    if req.transport == "sse":
        return StreamingResponse(_sse(audio, req, voice, request_id), media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})
    if not sample.stream:
        return await _complete(audio, req, headers)
    return StreamingResponse(_bytes(audio), media_type=CONTENT_TYPES[req.format], headers=headers)


async def _bytes(audio: AsyncIterator[tuple[bytes, float, float]]) -> AsyncIterator[bytes]:
    async for data, _, _ in audio:
        if data:
            yield data


def riff_sized(wav: bytes) -> bytes:
    """A streamed WAV (sizes 0xFFFFFFFF) with its real RIFF and data sizes filled in."""
    return wav[:4] + struct.pack("<I", len(wav) - 8) + wav[8:40] + struct.pack("<I", len(wav) - 44) + wav[44:]


async def _complete(audio: AsyncIterator[tuple[bytes, float, float]], req: SynthesisRequest,
                    headers: dict[str, str]) -> Response:
    started = time.perf_counter()
    parts: list[bytes] = []
    audio_s = 0.0
    async for data, seconds, _ in audio:
        parts.append(data)
        audio_s += seconds
    elapsed = time.perf_counter() - started
    body = b"".join(parts)
    if req.format == "wav":
        body = riff_sized(body)
    return Response(body, media_type=CONTENT_TYPES[req.format], headers={
        **headers,
        "X-Audio-Duration": f"{audio_s:.3f}",
        "X-Inference-Time-Ms": str(int(elapsed * 1000)),
        "X-RTF": f"{elapsed / audio_s:.3f}" if audio_s > 0 else "0",
        "X-Characters-Processed": str(len(req.text)),
    })


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()


async def _sse(audio: AsyncIterator[tuple[bytes, float, float]], req: SynthesisRequest, voice: str,
               request_id: str) -> AsyncIterator[bytes]:
    yield _event("audio_stream_start", {"request_id": request_id, "format": req.format, "voice": voice,
                                        "sample_rate": req.sample_rate})
    seq = 0
    audio_s = 0.0
    try:
        async for data, seconds, _ in audio:
            audio_s += seconds
            if data:
                yield _event("audio_chunk", {"request_id": request_id, "seq": seq,
                                             "data": base64.b64encode(data).decode("ascii")})
                seq += 1
    except Exception as exc:
        yield _event("error", {"request_id": request_id, "code": "synthesis_failed",
                               "message": f"synthesis failed: {type(exc).__name__}: {exc}"})
        return
    yield _event("audio_stream_end", {"request_id": request_id, "total_chunks": seq, "duration_s": round(audio_s, 3)})
