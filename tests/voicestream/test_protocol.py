"""The wire protocol's parsing and validation, shared by server and clients."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.protocol import (
    MAX_FRAME_BYTES,
    Cancel,
    ClientMessage,
    Close,
    Configure,
    Delta,
    Flush,
    Ping,
    ProtocolError,
    Speak,
    SynthesisRequest,
    encode_client_message,
    parse_client_message,
    parse_request,
)
from voicestream.protocol.aws import SampleSpeak

VALID: list[tuple[dict[str, Any], ClientMessage]] = [
    ({"type": "configure", "voice": "af_heart", "speed": 1.2, "format": "mp3", "sample_rate": 16000},
     Configure(voice="af_heart", speed=1.2, format="mp3", sample_rate=16000)),
    ({"type": "configure"}, Configure()),
    ({"type": "speak", "text": "Hi.", "id": "u1"}, Speak(text="Hi.", id="u1")),
    ({"type": "speak", "text": "Hi.", "voice": "am_michael", "speed": 0.5},
     Speak(text="Hi.", voice="am_michael", speed=0.5)),
    ({"type": "delta", "text": ""}, Delta(text="")),
    ({"type": "delta", "text": " wor"}, Delta(text=" wor")),
    ({"type": "flush"}, Flush()),
    ({"type": "cancel"}, Cancel()),
    ({"type": "close"}, Close()),
    ({"type": "ping"}, Ping()),
    ({"text": "Hello.", "voice": "af_heart", "speed": 1, "request_id": "r"},
     SampleSpeak(text="Hello.", id="r", voice="af_heart", speed=1.0)),
]


@pytest.mark.parametrize(("payload", "expected"), VALID, ids=[str(p.get("type", "legacy")) for p, _ in VALID])
def test_valid_messages_parse_from_text_and_binary_frames(payload: dict[str, Any], expected: ClientMessage) -> None:
    raw = json.dumps(payload)
    assert parse_client_message(raw) == expected
    assert parse_client_message(raw.encode()) == expected


@pytest.mark.parametrize(("payload", "expected"), VALID, ids=[str(p.get("type", "legacy")) for p, _ in VALID])
def test_encoding_round_trips(payload: dict[str, Any], expected: ClientMessage) -> None:
    assert parse_client_message(encode_client_message(expected)) == expected


INVALID = [
    ("", "invalid_json", None),
    ("null", "invalid_json", None),
    ('"speak"', "invalid_json", None),
    ("{}", "invalid_field", "type"),
    ('{"type": 3}', "invalid_field", "type"),
    ('{"type": "sing"}', "unknown_type", "type"),
    ('{"type": "speak"}', "invalid_field", "text"),
    ('{"type": "speak", "text": ""}', "invalid_field", "text"),
    ('{"type": "speak", "text": ["a"]}', "invalid_field", "text"),
    ('{"type": "speak", "text": "a", "id": ""}', "invalid_field", "id"),
    ('{"type": "speak", "text": "a", "id": 7}', "invalid_field", "id"),
    ('{"type": "speak", "text": "a", "speed": 2.5}', "invalid_field", "speed"),
    ('{"type": "speak", "text": "a", "speed": Infinity}', "invalid_field", "speed"),
    ('{"type": "speak", "text": "a", "speed": false}', "invalid_field", "speed"),
    ('{"type": "speak", "text": "a", "extra": 1}', "invalid_field", "extra"),
    ('{"type": "flush", "now": true}', "invalid_field", "now"),
    ('{"type": "configure", "format": "MP3"}', "invalid_field", "format"),
    ('{"type": "configure", "sample_rate": "24000"}', "invalid_field", "sample_rate"),
    ('{"type": "configure", "sample_rate": true}', "invalid_field", "sample_rate"),
    ('{"text": "a", "bogus": 1}', "invalid_field", "bogus"),
    ('{"type": "speak", "text": "' + "x" * 10_001 + '"}', "text_too_long", "text"),
    ('{"type": "speak", "text": "a\\ud800"}', "invalid_field", "text"),  # a lone surrogate
    ('{"type": "delta", "text": "\\udc00 b"}', "invalid_field", "text"),
    ('{"type": "speak", "text": "a", "voice": "' + "v" * 129 + '"}', "invalid_field", "voice"),
    ("[" * 100_000, "frame_too_large", None),
]


@pytest.mark.parametrize(("raw", "code", "field"), INVALID, ids=[f"{c}-{i}" for i, (_, c, _) in enumerate(INVALID)])
def test_invalid_messages_name_the_problem(raw: str, code: str, field: str | None) -> None:
    with pytest.raises(ProtocolError) as error:
        parse_client_message(raw)
    assert error.value.code == code and error.value.field == field
    body = error.value.to_dict(id="u1")
    assert body["type"] == "error" and body["id"] == "u1" and body["code"] == code
    if field:
        assert body["field"] == field and body["message"].startswith(f"{field}:")


def test_deep_nesting_under_the_frame_limit_is_an_error_not_a_crash() -> None:
    with pytest.raises(ProtocolError) as error:
        parse_client_message("[" * (MAX_FRAME_BYTES - 10))
    assert error.value.code == "invalid_json"


def test_non_utf8_binary_frames_are_invalid_json() -> None:
    with pytest.raises(ProtocolError) as error:
        parse_client_message(b"\xc3\x28")
    assert error.value.code == "invalid_json" and "UTF-8" in error.value.message


def test_requests_parse_with_defaults_and_round_trip() -> None:
    request = parse_request(b'{"text": "Hello."}')
    assert request == SynthesisRequest(text="Hello.")
    full = SynthesisRequest(text="Hi.", voice="af_heart", speed=1.5, format="opus", sample_rate=48000, transport="sse")
    assert parse_request(json.dumps(full.to_json())) == full


@pytest.mark.parametrize(("body", "field"), [
    ("{}", "text"), ('{"text": "a", "transport": "ws"}', "transport"), ('{"text": "a", "format": "ogg"}', "format"),
    ('{"text": "a", "voice": null}', "voice"), ('{"text": "a", "speed": "1"}', "speed"),
])
def test_bad_requests_name_the_field(body: str, field: str) -> None:
    with pytest.raises(ProtocolError) as error:
        parse_request(body)
    assert error.value.field == field


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200),
                 st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
                              lambda inner: (st.lists(inner, max_size=4)
                                             | st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                              max_leaves=12).map(json.dumps)))
def test_any_frame_either_parses_or_raises_a_protocol_error(raw: bytes | str) -> None:
    try:
        parse_client_message(raw)
    except ProtocolError as error:
        assert error.code in {"invalid_json", "invalid_field", "unknown_type", "text_too_long", "frame_too_large"}


@pytest.mark.parametrize(("raw", "expected_id"), [
    ('{"type": "speak", "text": "a", "id": "u7", "speed": 9}', "u7"),
    ('{"text": "a", "request_id": "r2", "speed": "x"}', "r2"),
    ('{"type": "speak", "text": "", "id": 5}', None),
    ('{"type": "speak", "id": "' + "i" * 129 + '"}', None),
])
def test_a_refusal_names_the_utterance_it_refuses(raw: str, expected_id: str | None) -> None:
    with pytest.raises(ProtocolError) as error:
        parse_client_message(raw)
    assert error.value.id == expected_id
    assert error.value.to_dict().get("id") == expected_id
