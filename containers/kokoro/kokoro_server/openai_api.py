"""OpenAI's speech API over Kokoro, for the clients that reach self-hosted TTS through it.

``POST /v1/audio/speech`` takes OpenAI's body (``model``, ``input``, ``voice``, ``instructions``,
``response_format``, ``speed``, ``stream_format``) and streams the audio as it is synthesized;
``GET /v1/audio/voices`` and ``GET /v1/models`` list what can be asked for. SageMaker routes only
``/invocations``, so the app hands a body there holding ``input`` (and no ``text``) to
:func:`respond` too: the same payload works through InvokeEndpoint.

Translations, each documented in docs/protocol.md#openai-compatible-speech-api:

* ``model``: any of :data:`MODELS` (OpenAI's names too, so a client configured for OpenAI needs no
  change); each is Kokoro-82M. Others: 404 ``model_not_found``, as OpenAI answers.
* ``voice``: a Kokoro voice or blend; OpenAI's built-in names speak with Kokoro's voice of that
  name where there is one (:data:`OPENAI_ALIASES`: ``alloy`` is ``af_alloy``), else with the
  server's default voice; ``{"id": ...}`` is read as the name. The voice used is in the
  ``X-Kokoro-Voice`` header.
* ``instructions``: Kokoro cannot follow them; accepted, ignored, and the response says so in
  ``X-Kokoro-Ignored-Fields: instructions``.
* ``speed``: OpenAI's range, 0.25-4.0, passed to the model as it is (the native routes keep
  0.5-2.0: how Kokoro sounds beyond that is in docs/protocol.md#openai-compatible-speech-api).
* ``pcm`` is 24 kHz s16le mono, as OpenAI's; every format is at 24 kHz.
* ``lang_code`` (Kokoro-FastAPI's field, not OpenAI's): kokoro's one-letter language code, which
  overrides the voice's own language; one this server cannot read is refused naming ``lang_code``.

Kokoro-FastAPI's extra fields (:data:`KOKORO_FASTAPI_FIELDS`), which its users' clients send, mean
what they mean there: ``stream`` (default true; false answers with the whole file at once, its
length known), ``volume_multiplier`` (scales the samples; clipped at full scale),
``normalization_options`` (its switches, mapped onto our normalization groups:
:data:`KFA_NORMALIZATION`). ``return_download_link`` and ``download_format`` are accepted and
ignored: this server keeps no files to link to; ``X-Kokoro-Ignored-Fields`` names them when set.

Errors use OpenAI's body, ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from voicestream.protocol import (
    FORMATS,
    NATIVE_SAMPLE_RATE,
    ProtocolError,
    SynthesisRequest,
    check_speed,
    check_text,
)
from voicestream.protocol.languages import optional_lang
from voicestream.protocol.normalization import NORMALIZE_ALL, Normalization, check_normalization
from voicestream.protocol.sse import sse_frame

from .audio import CONTENT_TYPES, sized_file
from .invocations import MAX_BODY_BYTES, Encoded, encoded_audio, failure_message, opened, read_body
from .languages import names
from .synth import Synthesizer

log = logging.getLogger(__name__)

MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15")
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse", "marin", "cedar",
)
# OpenAI's names that Kokoro has a voice of (hexgrad named these packs after them); the rest speak
# with the server's default voice (af_heart wherever the English voices are).
OPENAI_ALIASES = {"alloy": "af_alloy", "echo": "am_echo", "fable": "bm_fable", "nova": "af_nova", "onyx": "am_onyx"}
OPENAI_FIELDS = frozenset({
    "model", "input", "voice", "instructions", "response_format", "speed", "stream_format", "normalize",
    "lang_code",
})
KOKORO_FASTAPI_FIELDS = frozenset({
    "stream", "volume_multiplier", "normalization_options", "return_download_link", "download_format",
})
FIELDS = OPENAI_FIELDS | KOKORO_FASTAPI_FIELDS
# Kokoro-FastAPI's normalization_options switches -> our normalization group (protocol.normalization).
KFA_NORMALIZATION = {
    "unit_normalization": "units", "url_normalization": "urls", "email_normalization": "emails",
    "phone_normalization": "phones", "replace_remaining_symbols": "symbols",
    "optional_pluralization_normalization": "plurals",
}
MAX_VOLUME = 10.0  # volume_multiplier's upper bound (Kokoro-FastAPI sets none; past this it is noise)
STREAM_FORMATS = ("audio", "sse")
OPENAI_SPEED_MIN, OPENAI_SPEED_MAX = 0.25, 4.0  # OpenAI's documented range for ``speed``
FRAMES_PER_SECOND = 40  # Kokoro's duration frames (25 ms): the unit of usage.output_tokens


class OpenAIError(Exception):
    """A refusal in OpenAI's shape; ``param`` names the field."""

    def __init__(self, message: str, *, param: str | None, code: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.code, self.status = message, param, code, status

    @classmethod
    def from_protocol(cls, exc: ProtocolError) -> "OpenAIError":
        return cls(exc.message, param=exc.field, code=exc.code)

    def response(self) -> JSONResponse:
        kind = "server_error" if self.status >= 500 else "invalid_request_error"
        body = {"message": self.message, "type": kind, "param": self.param, "code": self.code}
        return JSONResponse({"error": body}, status_code=self.status)


@dataclass(frozen=True, kw_only=True)
class SpeechRequest:
    """One ``POST /v1/audio/speech`` body, validated; ``voice`` None means the server's default."""

    model: str
    input: str
    voice: str | None
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: str = "audio"
    instructions: str | None = None
    normalize: Normalization = NORMALIZE_ALL  # ours, not OpenAI's: text normalization (docs/normalization.md)
    stream: bool = True  # Kokoro-FastAPI's: false sends the whole file at once
    volume: float = 1.0  # Kokoro-FastAPI's volume_multiplier
    ignored: tuple[str, ...] = ()  # fields accepted that change nothing here (X-Kokoro-Ignored-Fields)
    lang_code: str | None = None  # Kokoro-FastAPI's: the G2P language (None: the voice's)


def _choice(payload: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value: object = payload.get(name, default)
    if not isinstance(value, str) or value not in allowed:
        raise OpenAIError(f"{name}: must be one of {', '.join(allowed)}, got {value!r}", param=name,
                          code="invalid_value")
    return value


def parse_speech(payload: dict[str, Any]) -> SpeechRequest:
    """Validate OpenAI's speech body; every refusal is an OpenAIError naming ``param``."""
    unknown = sorted(set(payload) - FIELDS)
    if unknown:
        raise OpenAIError(f"{unknown[0]}: unrecognized request argument", param=unknown[0], code="unknown_parameter")
    for name in ("model", "input", "voice"):
        if name not in payload:
            raise OpenAIError(f"{name}: is required", param=name, code="missing_required_parameter")
    model = payload["model"]
    if not isinstance(model, str) or model not in MODELS:
        raise OpenAIError(f"model: {model!r} does not exist here; use one of {', '.join(MODELS)}",
                          param="model", code="model_not_found", status=404)
    try:
        text = check_text(payload["input"], name="input")
        speed = check_speed(payload.get("speed", 1.0), low=OPENAI_SPEED_MIN, high=OPENAI_SPEED_MAX)
        normalize = check_normalization(payload.get("normalize", True))
        lang_code = optional_lang(payload, "lang_code")
    except ProtocolError as exc:
        raise OpenAIError.from_protocol(exc) from None
    instructions = payload.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise OpenAIError("instructions: must be a string", param="instructions", code="invalid_type")
    stream = _flag(payload, "stream", True)
    stream_format = _choice(payload, "stream_format", STREAM_FORMATS, "audio")
    if not stream and stream_format == "sse":
        raise OpenAIError("stream: false asks for one file; stream_format sse is a stream of events",
                          param="stream", code="invalid_value")
    ignored = [name for name in ("instructions", "return_download_link") if payload.get(name)]
    if payload.get("download_format") is not None:
        _choice(payload, "download_format", FORMATS, "mp3")
        ignored.append("download_format")
    _flag(payload, "return_download_link", False)
    return SpeechRequest(
        model=model, input=text, voice=_voice(payload["voice"]),
        response_format=_choice(payload, "response_format", FORMATS, "mp3"), speed=speed,
        stream_format=stream_format, instructions=instructions,
        normalize=_with_kfa_options(normalize, payload.get("normalization_options")), stream=stream,
        volume=_volume(payload.get("volume_multiplier")), ignored=tuple(ignored), lang_code=lang_code,
    )


def _flag(payload: dict[str, Any], name: str, default: bool) -> bool:
    value = payload.get(name, default)
    if not isinstance(value, bool):
        raise OpenAIError(f"{name}: must be true or false, got {type(value).__name__}", param=name,
                          code="invalid_type")
    return value


def _volume(value: object) -> float:
    """Kokoro-FastAPI's ``volume_multiplier``: null or absent is 1."""
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_VOLUME:
        raise OpenAIError(f"volume_multiplier: must be a number from 0 to {MAX_VOLUME:g}, got {value!r}",
                          param="volume_multiplier", code="invalid_value")
    return float(value)


def _with_kfa_options(normalize: Normalization, options: object) -> Normalization:
    """``normalize`` with Kokoro-FastAPI's ``normalization_options`` applied: ``normalize: false``
    turns every rule off, each switch set false its group (:data:`KFA_NORMALIZATION`); a switch it
    does not name stays as ``normalize`` has it."""
    if options is None:
        return normalize
    if not isinstance(options, dict):
        raise OpenAIError("normalization_options: must be an object of switch -> bool",
                          param="normalization_options", code="invalid_type")
    off = set(normalize.off)
    for name, on in options.items():
        field = f"normalization_options.{str(name)[:40]}"
        if name != "normalize" and name not in KFA_NORMALIZATION:
            raise OpenAIError(f"{field}: unknown switch; expected normalize or one of {', '.join(KFA_NORMALIZATION)}",
                              param=field, code="unknown_parameter")
        if not isinstance(on, bool):
            raise OpenAIError(f"{field}: must be true or false, got {type(on).__name__}", param=field,
                              code="invalid_type")
        if not on and name != "normalize":
            off.add(KFA_NORMALIZATION[name])
    enabled = normalize.enabled and options.get("normalize", True)
    return Normalization(enabled=enabled, off=frozenset(off))


def _voice(value: object) -> str | None:
    if isinstance(value, dict) and set(value) == {"id"}:
        value = value["id"]
    if not isinstance(value, str) or not value.strip():
        raise OpenAIError("voice: must be a voice name, a blend, or {\"id\": name}", param="voice", code="invalid_type")
    return value


def _resolve_voice(synth: Synthesizer, voice: str | None) -> str:
    if voice is not None and voice.lower() in OPENAI_VOICES and voice not in synth.voice_book:
        alias = OPENAI_ALIASES.get(voice.lower())
        return alias if alias is not None and alias in synth.voice_book else synth.default_voice
    try:
        return synth.resolve_voice(voice)
    except ProtocolError as exc:
        raise OpenAIError.from_protocol(exc) from None


async def speech(request: Request) -> Response:
    body = await read_body(request)
    if body is None:
        return OpenAIError(f"the body is over {MAX_BODY_BYTES} bytes", param=None, code="body_too_large",
                           status=413).response()
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return OpenAIError(f"not valid JSON: {exc}", param=None, code="invalid_json").response()
    if not isinstance(payload, dict):
        return OpenAIError("the body must be a JSON object", param=None, code="invalid_json").response()
    return await respond(request.app.state.synth, payload)


async def respond(synth: Synthesizer, payload: dict[str, Any]) -> Response:
    """Answer an OpenAI speech body (from /v1/audio/speech or /invocations)."""
    try:
        req = parse_speech(payload)
        voice = _resolve_voice(synth, req.voice)
        lang = synth.resolve_language(voice, req.lang_code, field="lang_code")
    except OpenAIError as exc:
        return exc.response()
    except ProtocolError as exc:
        return OpenAIError.from_protocol(exc).response()
    native = SynthesisRequest(text=req.input, voice=voice, speed=req.speed, format=req.response_format,  # type: ignore[arg-type]
                              sample_rate=NATIVE_SAMPLE_RATE, normalize=req.normalize, lang=lang)
    headers = {"X-Kokoro-Voice": voice, "X-Audio-Sample-Rate": str(NATIVE_SAMPLE_RATE)}
    if req.ignored:
        headers["X-Kokoro-Ignored-Fields"] = ", ".join(req.ignored)
    try:  # the response starts once there is audio: a synthesis failing before it is a 500
        audio = await opened(encoded_audio(synth, native, voice, gain=req.volume))
        if not req.stream:
            whole = b"".join([part.data async for part in audio])
            return Response(sized_file(req.response_format, whole), media_type=CONTENT_TYPES[req.response_format],
                            headers=headers)
    except Exception as exc:
        log.exception("openai speech request failed")
        return OpenAIError(failure_message(exc), param=None, code="synthesis_failed", status=500).response()
    if req.stream_format == "sse":
        return StreamingResponse(_sse(audio, native), media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-cache"})
    return StreamingResponse(_audio(audio), media_type=CONTENT_TYPES[req.response_format], headers=headers)


async def _audio(audio: AsyncIterator[Encoded]) -> AsyncIterator[bytes]:
    async for part in audio:
        if part.data:
            yield part.data


async def _sse(audio: AsyncIterator[Encoded], req: SynthesisRequest) -> AsyncIterator[bytes]:
    """OpenAI's speech events: ``speech.audio.delta`` (base64 audio) ... ``speech.audio.done``."""
    audio_s = 0.0
    try:
        async for part in audio:
            audio_s += part.audio_s
            if part.data:
                audio_b64 = base64.b64encode(part.data).decode("ascii")
                yield sse_frame({"type": "speech.audio.delta", "audio": audio_b64})
    except Exception as exc:
        log.exception("openai speech request failed")
        yield sse_frame({"type": "error", "error": {"message": failure_message(exc), "type": "server_error",
                                                 "param": None, "code": "synthesis_failed"}})
        return
    frames = round(audio_s * FRAMES_PER_SECOND)
    usage = {"input_tokens": len(req.text), "output_tokens": frames, "total_tokens": len(req.text) + frames}
    yield sse_frame({"type": "speech.audio.done", "usage": usage})


async def voices(request: Request) -> JSONResponse:
    synth: Synthesizer = request.app.state.synth
    return JSONResponse({
        "voices": synth.voice_book.names,
        "default": synth.default_voice,
        "languages": names(synth.languages),
        "blends": {"accepted": True, "syntax": synth.voice_book.blend_syntax},
        "openai_aliases": {"voices": list(OPENAI_VOICES), "speak_as": synth.default_voice, "as": {
            name: alias for name, alias in OPENAI_ALIASES.items() if alias in synth.voice_book}},
    })


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "kokoro"}


async def models(request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": [_model(name) for name in MODELS]})


async def model(request: Request) -> JSONResponse:
    """``GET /v1/models/{id}``: one model, or OpenAI's 404 ``model_not_found``."""
    name = request.path_params["model"]
    if name not in MODELS:
        return OpenAIError(f"model: {name[:80]!r} does not exist here; use one of {', '.join(MODELS)}",
                           param="model", code="model_not_found", status=404).response()
    return JSONResponse(_model(name))


def openai_body(body: bytes) -> dict[str, Any] | None:
    """The body as a dict when it is OpenAI's speech shape (``input`` and no ``text``), else None."""
    if b'"input"' not in body:
        return None
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) and "input" in payload and "text" not in payload else None

