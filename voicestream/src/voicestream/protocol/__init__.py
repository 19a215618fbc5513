"""The TTS wire protocol, both ways: one definition shared by the Kokoro server and every client.

Two routes speak it (docs/protocol.md has the prose and an example transcript):

* ``POST /invocations``: one JSON request (:class:`SynthesisRequest`), audio streamed back as raw
  bytes or as Server-Sent Events.
* ``WS /invocations-bidirectional-stream``: JSON client messages (:data:`ClientMessage`) in; typed
  control events (:class:`ServerEvent`) as JSON text frames and audio as binary frames out.

Parts: ``fields`` (limits, :class:`ProtocolError`, validators), ``audio`` (rates, formats, pcm
constants), ``messages`` (client -> server), ``events`` (server -> client, close codes), ``aws``
(the AWS sample's shape), ``languages`` (the ``lang`` field), ``edge`` (one connection's
translator), ``sse`` (the POST route's events), ``wire`` (encode / parse). Everything is pure
data and validation, so both sides agree on what is valid and every refusal names its field.
"""

from __future__ import annotations

from .audio import (
    AUDIO_FRAME_BYTES,
    CHANNELS,
    CONTENT_TYPES,
    FORMATS,
    NATIVE_SAMPLE_RATE,
    PCM_BYTES_PER_MS,
    PCM_BYTES_PER_SECOND,
    SAMPLE_RATES,
    SAMPLE_WIDTH,
    SUPPORTED_RATES,
    Format,
    check_audio_format,
    check_format,
    check_sample_rate,
)
from .edge import ServerEdge
from .events import (
    EVENTS,
    SERVER_EVENT_TYPES,
    Cancelled,
    CloseCode,
    Configured,
    ErrorEvent,
    Pong,
    ServerEvent,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
    Words,
    WordTime,
    server_event,
)
from .fields import (
    MAX_FRAME_BYTES,
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    PROTOCOL_VERSION,
    SPEED_MAX,
    SPEED_MIN,
    TRANSPORTS,
    ProtocolError,
    Transport,
    check_identifier,
    check_speed,
    check_text,
    check_transport,
)
from .languages import LANGUAGES, check_lang, voice_language
from .messages import (
    MESSAGE_TYPES,
    Cancel,
    ClientMessage,
    Close,
    Configure,
    Delta,
    Flush,
    Ping,
    SessionSettings,
    Speak,
    SynthesisRequest,
)
from .sse import SSE_EVENTS, SseAudio, SseEnd, SseStart, SseWords, encode_sse, parse_sse
from .wire import (
    decode_event,
    encode_client_message,
    encode_event,
    parse_client_message,
    parse_event,
    parse_request,
)

__all__ = [
    "AUDIO_FRAME_BYTES", "CHANNELS", "CONTENT_TYPES", "EVENTS", "FORMATS", "LANGUAGES", "MAX_FRAME_BYTES",
    "MAX_ID_CHARS", "MAX_TEXT_CHARS", "MESSAGE_TYPES", "NATIVE_SAMPLE_RATE", "PCM_BYTES_PER_MS",
    "PCM_BYTES_PER_SECOND", "PROTOCOL_VERSION", "SAMPLE_RATES", "SAMPLE_WIDTH", "SERVER_EVENT_TYPES",
    "SPEED_MAX", "SSE_EVENTS", "SseAudio", "SseEnd", "SseStart", "encode_sse", "parse_sse", "SPEED_MIN",
    "SUPPORTED_RATES", "TRANSPORTS", "Cancel", "Cancelled", "ClientMessage",
    "Close", "CloseCode", "Configure", "Configured", "Delta", "ErrorEvent", "Flush", "Format", "Ping",
    "Pong", "ProtocolError", "ServerEdge", "ServerEvent", "SessionSettings", "Speak",
    "SynthesisRequest", "Transport", "TurnEnd", "UtteranceEnd", "UtteranceStart", "Words", "WordTime",
    "SseWords", "check_audio_format",
    "check_format", "check_identifier", "check_lang", "check_sample_rate", "check_speed", "check_text",
    "check_transport", "decode_event", "encode_client_message", "encode_event", "parse_client_message",
    "parse_event", "parse_request", "server_event", "voice_language",
]
