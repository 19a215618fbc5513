"""``POST /invocations`` in the native shape: one text in, its audio streamed out as it is made.

(app.py reads the body and hands OpenAI's and the AWS sample's shapes to their own modules; they
reuse :func:`read_body`, :func:`encoded_audio` and the error body from here.)

The text is cut into sentences so the first sentence's audio leaves before the rest is
synthesized. ``transport: "binary"`` streams the encoded audio bytes (one encoder for the whole
response, flushed at the end); ``transport: "sse"`` streams Server-Sent Events with base64 audio
and ``start`` / ``end`` / ``error`` events. Errors found before the first byte are HTTP 4xx with a
JSON body naming the field. The response starts only once the first sentence has audio
(:func:`opened`), so a synthesis that fails before it (G2P could not read the text, the model
raised) is a 500 with code ``synthesis_failed``; a failure after it is an SSE ``error`` event, or
for raw bytes an aborted body (HTTP has no way to take a 200 back; the chunked body never ends,
so no client takes the part it got for the whole).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, replace

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from voicestream.chunker import iter_sentences
from voicestream.protocol import (
    MAX_TEXT_CHARS,
    ErrorEvent,
    ProtocolError,
    SseAudio,
    SseEnd,
    SseStart,
    SseWords,
    SynthesisRequest,
    encode_sse,
    parse_request,
)

from .audio import CONTENT_TYPES, StreamEncoder, encode_off_loop, validate_format
from .metrics import UtteranceClock
from .speech import Speech
from .synth import Synthesizer
from .words import WordTiming

log = logging.getLogger(__name__)

# The JSON body may escape every character (\\uXXXX: 6 bytes) plus the other fields.
MAX_BODY_BYTES = MAX_TEXT_CHARS * 6 + 4096


def error_response(exc: ProtocolError, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": {k: v for k, v in exc.to_dict().items() if k != "type"}}, status_code=status)


def failure_message(exc: BaseException) -> str:
    """What a client is told of a synthesis that failed (cut: an exception may quote the whole text)."""
    message = f"synthesis failed: {type(exc).__name__}: {exc}"
    return message if len(message) <= 300 else message[:299] + "…"


def failed(exc: BaseException) -> JSONResponse:
    """A 500 for a synthesis that failed before its response started."""
    return error_response(ProtocolError("synthesis_failed", failure_message(exc)), 500)


def too_large() -> JSONResponse:
    return error_response(ProtocolError("body_too_large", f"request body is over {MAX_BODY_BYTES} bytes"), 413)


async def read_body(request: Request) -> bytes | None:
    """The body, or None once it passes MAX_BODY_BYTES: read no further than that, so a huge or
    endless body costs the server at most the limit in memory."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)


def check_audio(req: SynthesisRequest) -> None:
    """The (format, sample rate) pair an encoder can make; ProtocolError naming the field if not."""
    validate_format(req.format, req.sample_rate)


async def native(request: Request, synth: Synthesizer, body: bytes) -> Response:
    """A body in the native shape (the app hands OpenAI's and the AWS sample's to their modules)."""
    try:
        req = parse_request(body)
        voice = synth.resolve_voice(req.voice)
        req = replace(req, lang=synth.resolve_language(voice, req.lang))
        check_audio(req)
    except ProtocolError as exc:
        return error_response(exc)
    request_id = request.headers.get("x-amzn-requestid") or uuid.uuid4().hex
    headers = {"X-Request-Id": request_id, "X-Audio-Format": req.format, "X-Audio-Sample-Rate": str(req.sample_rate)}
    started = time.perf_counter()
    try:
        audio = await opened(encoded_audio(synth, req, voice))
    except Exception as exc:
        log.exception("request %s failed before its first audio", request_id)
        return failed(exc)
    if req.transport == "sse":
        return StreamingResponse(_sse(audio, req, voice, request_id, started), media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})
    return StreamingResponse(_binary(audio), media_type=CONTENT_TYPES[req.format], headers=headers)


@dataclass(frozen=True, kw_only=True)
class Encoded:
    """One sentence's encoded audio (maybe b"" while a codec fills a frame), its length, the model's
    time on it, and its words (times from the start of the response's audio)."""

    data: bytes
    audio_s: float = 0.0
    synthesis_s: float = 0.0
    words: tuple[WordTiming, ...] = ()


async def encoded_audio(
    synth: Synthesizer, req: SynthesisRequest, voice: str, *, gain: float = 1.0,
) -> AsyncGenerator[Encoded, None]:
    """Encoded audio as it is made, sentence by sentence, then the encoder's tail; ``gain`` scales
    the samples (clipped at full scale by the encoder)."""
    owner = object()
    encoder = StreamEncoder(fmt=req.format, sample_rate=req.sample_rate)
    speech = Speech(synth, owner=owner, pieces=iter_sentences(req.text), voice=voice, speed=req.speed, text=req.text,
                    normalize=req.normalize, lang=req.lang)
    finished = False
    clock = UtteranceClock(route="http", fmt=req.format)
    try:
        async for chunk in speech:
            samples = chunk.synthesis.audio if gain == 1.0 else chunk.synthesis.audio * np.float32(gain)
            data = await encode_off_loop(encoder, samples)
            yield Encoded(data=data, audio_s=chunk.synthesis.seconds, synthesis_s=chunk.synthesis_s, words=chunk.words)
            clock.audio(seconds=chunk.synthesis.seconds, synthesis_s=chunk.synthesis_s)
        finished = True
        yield Encoded(data=encoder.finish())
        clock.finish()
    finally:  # the client left or the stream ended: free the model now
        if not finished:
            encoder.close()
        speech.cancel()
        synth.scheduler.forget_owner(owner)


async def opened(parts: AsyncGenerator[Encoded, None]) -> AsyncIterator[Encoded]:
    """``parts`` with the first one already made, so that a synthesis failing before any audio
    (G2P, the model) raises here, while the response can still be an error status; later
    failures raise while the response streams."""
    try:
        first = await anext(parts)
    except StopAsyncIteration:
        return parts

    async def resumed() -> AsyncIterator[Encoded]:
        try:
            yield first
            async for part in parts:
                yield part
        finally:  # the client left: end the synthesis now, not when the generator is collected
            await parts.aclose()

    return resumed()


async def _binary(audio: AsyncIterator[Encoded]) -> AsyncIterator[bytes]:
    async for part in audio:
        if part.data:
            yield part.data


async def _sse(
    audio: AsyncIterator[Encoded], req: SynthesisRequest, voice: str, request_id: str, started: float,
) -> AsyncIterator[bytes]:
    yield encode_sse(SseStart(id=request_id, voice=voice, format=req.format, sample_rate=req.sample_rate))
    audio_s = synthesis_s = 0.0
    first_s: float | None = None  # model time before the first audio event (windows: the first one's)
    index = 0
    try:
        async for part in audio:
            audio_s += part.audio_s
            synthesis_s += part.synthesis_s
            if req.timestamps and part.words:  # before the audio they are spoken in
                yield encode_sse(SseWords(id=request_id, words=tuple(w.wire() for w in part.words)))
            if part.data:
                first_s = synthesis_s if first_s is None else first_s
                yield encode_sse(SseAudio.of(index=index, data=part.data))
                index += 1
    except Exception as exc:
        log.exception("request %s failed", request_id)
        yield encode_sse(ErrorEvent(code="synthesis_failed", message=failure_message(exc)))
        return
    yield encode_sse(SseEnd(
        id=request_id, chunks=index, audio_ms=round(audio_s * 1000), synthesis_ms=round(synthesis_s * 1000),
        elapsed_ms=round((time.perf_counter() - started) * 1000),
        first_audio_synthesis_ms=round((first_s or 0.0) * 1000),
    ))
