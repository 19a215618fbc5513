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

Fields outside the sample's set are refused, as in the native shape. The shape is read by
``voicestream.protocol.aws`` (:func:`request_from_sample`); this module answers it.
"""

from __future__ import annotations

import base64
import json
import logging
import struct
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from voicestream.protocol import ProtocolError, SynthesisRequest, aws
from voicestream.protocol.sse import sse_frame

from .audio import CONTENT_TYPES
from .invocations import Encoded, check_audio, encoded_audio, error_response, failed, failure_message, opened
from .synth import Synthesizer

log = logging.getLogger(__name__)

STALE_STATUS = 408


def sample_payload(body: bytes) -> dict[str, Any] | None:
    """The parsed body when it is in the sample's shape, else None (the native parser takes it)."""
    if not any(f'"{marker}"'.encode() in body for marker in aws.HTTP_MARKERS):
        return None
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) and aws.is_sample_body(payload) else None


async def respond_sample(request: Request, synth: Synthesizer, payload: dict[str, Any]) -> Response:
    """Answer a body in the sample's shape (see the module docstring)."""
    try:
        sample = aws.request_from_sample(payload)
        if sample.request_timestamp is not None:
            aws.check_fresh(sample.request_timestamp, now=time.time(),
                            max_age_s=request.app.state.settings.max_request_age_s)
        voice = synth.resolve_voice(sample.request.voice)
        req = replace(sample.request, lang=synth.resolve_language(voice, sample.request.lang))
        check_audio(req)
    except ProtocolError as exc:
        return error_response(exc, STALE_STATUS if exc.code == "request_stale" else 400)
    request_id = sample.request_id or request.headers.get("x-amzn-requestid") or uuid.uuid4().hex
    headers = {"X-Request-Id": request_id, "X-Audio-Format": req.format, "X-Audio-Sample-Rate": str(req.sample_rate)}
    try:  # the response starts once there is audio: a synthesis failing before it is a 500
        audio = await opened(encoded_audio(synth, req, voice))
        if not sample.stream:
            return await _complete(audio, req, headers)
    except Exception as exc:
        log.exception("request %s failed", request_id)
        return failed(exc)
    if req.transport == "sse":
        return StreamingResponse(_sse(audio, req, voice, request_id), media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})
    return StreamingResponse(_bytes(audio), media_type=CONTENT_TYPES[req.format], headers=headers)


async def _bytes(audio: AsyncIterator[Encoded]) -> AsyncIterator[bytes]:
    async for part in audio:
        if part.data:
            yield part.data


def riff_sized(wav: bytes) -> bytes:
    """A streamed WAV (sizes 0xFFFFFFFF) with its real RIFF and data sizes filled in."""
    return wav[:4] + struct.pack("<I", len(wav) - 8) + wav[8:40] + struct.pack("<I", len(wav) - 44) + wav[44:]


async def _complete(audio: AsyncIterator[Encoded], req: SynthesisRequest, headers: dict[str, str]) -> Response:
    started = time.perf_counter()
    parts: list[bytes] = []
    audio_s = 0.0
    async for part in audio:
        parts.append(part.data)
        audio_s += part.audio_s
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


async def _sse(
    audio: AsyncIterator[Encoded], req: SynthesisRequest, voice: str, request_id: str
) -> AsyncIterator[bytes]:
    yield sse_frame(event="audio_stream_start", data={"request_id": request_id, "format": req.format,
                                                      "voice": voice, "sample_rate": req.sample_rate})
    seq = 0
    audio_s = 0.0
    try:
        async for part in audio:
            audio_s += part.audio_s
            if part.data:
                yield sse_frame(event="audio_chunk", data={"request_id": request_id, "seq": seq,
                                                           "data": base64.b64encode(part.data).decode("ascii")})
                seq += 1
    except Exception as exc:
        log.exception("request %s failed", request_id)
        yield sse_frame(event="error", data={"request_id": request_id, "code": "synthesis_failed",
                                             "message": failure_message(exc)})
        return
    yield sse_frame(event="audio_stream_end", data={"request_id": request_id, "total_chunks": seq,
                                                    "duration_s": round(audio_s, 3)})
