"""Server -> client: typed events with one encode and one parse, the AWS sample's shape at the edge,
POST's SSE events, and the format/rate table the server and clients share."""

from __future__ import annotations

import json

import pytest

from voicestream.protocol import (
    EVENTS,
    Cancelled,
    Configured,
    ErrorEvent,
    Pong,
    ProtocolError,
    ServerEdge,
    Speak,
    SseAudio,
    SseEnd,
    SseStart,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
    Words,
    WordTime,
    check_audio_format,
    decode_event,
    encode_event,
    encode_sse,
    parse_event,
    parse_sse,
)
from voicestream.protocol.aws import SampleSpeak

EVENTS_SENT = [
    Configured(voice="af_heart", speed=1.2, format="mp3", sample_rate=16000, voices=("af_heart", "am_michael"),
               limits={"max_text_chars": 10_000}, timestamps=True),
    Words(id="1.1", words=(WordTime(text="Hello", start_ms=300, end_ms=620, char_start=0, char_end=5),
                           WordTime(text="there", start_ms=650, end_ms=900, char_start=6, char_end=11))),
    UtteranceStart(id="1.1", turn=1, text="Hello."),
    UtteranceEnd(id="1.1", turn=1, audio_ms=900, synthesis_ms=80, bytes=43_200, format="pcm", sample_rate=24000),
    TurnEnd(turn=1, utterances=2, audio_ms=1800),
    Cancelled(turn=2, ids=("2.1", "2.2")),
    Pong(),
    ErrorEvent(code="queue_full", message="too many", field="text", id="u9"),
    ErrorEvent(code="busy", message="server busy"),
]


@pytest.mark.parametrize("event", EVENTS_SENT, ids=lambda e: type(e).__name__)
def test_every_server_event_round_trips_through_its_frame(event: object) -> None:
    assert decode_event(encode_event(event)) == event  # type: ignore[arg-type]


def test_frames_carry_the_documented_fields_and_leave_out_unset_ones() -> None:
    assert json.loads(encode_event(ErrorEvent(code="busy", message="full"))) == {
        "type": "error", "code": "busy", "message": "full"}
    assert json.loads(encode_event(Cancelled(turn=3, ids=("a",)))) == {"type": "cancelled", "turn": 3, "ids": ["a"]}
    assert set(EVENTS) == {"configured", "utterance_start", "words", "utterance_end", "turn_end", "cancelled", "pong",
                           "error"}


def test_a_client_reads_a_newer_or_sloppier_server_without_crashing() -> None:
    assert parse_event({"type": "visemes", "id": "1.1"}) is None  # a type it does not know yet
    sloppy = parse_event({"type": "words", "id": "1.1", "words": [{"text": "Hi", "start_ms": "0"}, 7,
                                                                   {"text": "ok", "start_ms": 1, "end_ms": 2,
                                                                    "char_start": 0, "char_end": 2}]})
    assert sloppy == Words(id="1.1", words=(WordTime(text="ok", start_ms=1, end_ms=2, char_start=0, char_end=2),))
    end = parse_event({"type": "utterance_end", "id": "x", "turn": "one", "bytes": True})
    assert end == UtteranceEnd(id="x", turn=None, bytes=0)
    assert parse_event({"type": "error"}) == ErrorEvent(code="error", message="no message")
    for bad in ('{"no": "type"}', "[1]", "not json"):
        with pytest.raises(ProtocolError):
            decode_event(bad)


def test_the_edge_answers_sample_shaped_requests_in_the_sample_shape_only() -> None:
    edge = ServerEdge()
    sample = edge.parse(json.dumps({"text": "Hi.", "request_id": "req-1"}))
    native = edge.parse(json.dumps({"type": "speak", "text": "Hi.", "id": "u1"}))
    assert sample == SampleSpeak(text="Hi.", id="req-1") and native == Speak(text="Hi.", id="u1")
    assert json.loads(edge.encode(UtteranceStart(id="req-1", turn=1, text="Hi."))) == {
        "type": "synthesis_start", "request_id": "req-1"}
    assert json.loads(edge.encode(UtteranceStart(id="u1", turn=1, text="Hi."))) == {
        "type": "utterance_start", "id": "u1", "turn": 1, "text": "Hi."}
    done = json.loads(edge.encode(UtteranceEnd(id="req-1", turn=1, audio_ms=5, bytes=240)))
    assert done["type"] == "synthesis_complete" and done["request_id"] == "req-1" and "turn" not in done
    # once complete, the same id spoken the native way is answered the native way
    assert json.loads(edge.encode(UtteranceEnd(id="req-1", turn=2)))["type"] == "utterance_end"
    # the client side reads the sample's answers as utterance events
    assert parse_event(done) == UtteranceEnd(id="req-1", turn=None, audio_ms=5, bytes=240)


def test_the_edge_names_a_sample_request_that_came_without_an_id() -> None:
    edge = ServerEdge()
    first, second = (edge.parse(json.dumps({"text": "Hi."})) for _ in range(2))
    assert isinstance(first, Speak) and isinstance(second, Speak)
    assert (first.id, second.id) == ("request-1", "request-2")
    assert json.loads(edge.encode(UtteranceStart(id="request-2", turn=1)))["type"] == "synthesis_start"


def test_sse_events_round_trip_and_carry_no_type_field() -> None:
    for event in (SseStart(id="r", voice="af_heart", format="opus", sample_rate=48000),
                  SseAudio.of(index=0, data=b"\x00\x01\xff"),
                  SseEnd(id="r", chunks=1, audio_ms=10, synthesis_ms=2, elapsed_ms=3),
                  ErrorEvent(code="synthesis_failed", message="boom")):
        head, data = encode_sse(event).decode().strip().split("\n")
        name = head.removeprefix("event: ")
        assert "type" not in json.loads(data.removeprefix("data: "))
        assert parse_sse(name, data.removeprefix("data: ")) == event
    assert SseAudio.of(index=0, data=b"\x00\x01\xff").data() == b"\x00\x01\xff"
    with pytest.raises(ProtocolError):
        SseAudio(index=0, audio="***").data()


@pytest.mark.parametrize(("fmt", "rate", "field"), [
    ("ogg", 24000, "format"), ("opus", 44100, "sample_rate"), ("pcm", 24000.0, "sample_rate"),
    ("pcm", True, "sample_rate"), (None, None, "format"),
])
def test_the_format_table_refuses_with_the_field_named(fmt: object, rate: object, field: str) -> None:
    with pytest.raises(ProtocolError) as error:
        check_audio_format(fmt, rate)
    assert error.value.field == field and error.value.message.startswith(f"{field}: ")
    assert check_audio_format("opus", 48000) == ("opus", 48000)


def test_a_new_event_type_is_one_decorated_dataclass_with_nested_fields_encoded() -> None:
    from dataclasses import dataclass

    from voicestream.protocol import ServerEvent, server_event

    @dataclass(frozen=True, kw_only=True)
    class Word:
        text: str
        start_ms: int
        end_ms: int | None = None

    registry: dict[str, type[ServerEvent]] = {}

    @server_event("words", registry=registry)
    @dataclass(frozen=True, kw_only=True)
    class Words(ServerEvent):
        id: str
        words: tuple[Word, ...]

    frame = json.loads(encode_event(Words(id="1.1", words=(Word(text="Hi", start_ms=0, end_ms=250),
                                                             Word(text="there", start_ms=250)))))
    assert frame == {"type": "words", "id": "1.1", "words": [{"text": "Hi", "start_ms": 0, "end_ms": 250},
                                                             {"text": "there", "start_ms": 250}]}
    assert registry == {"words": Words} and EVENTS["words"] is not Words  # its own registry only
