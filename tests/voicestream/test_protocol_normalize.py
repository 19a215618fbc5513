"""The ``normalize`` option on the wire: POST body, ``configure``, and the settings echoed back."""

from __future__ import annotations

import json

import pytest

from voicestream.protocol import (
    Configure,
    ProtocolError,
    SessionSettings,
    SynthesisRequest,
    encode_client_message,
    parse_client_message,
    parse_request,
)
from voicestream.protocol.normalization import NORMALIZE_ALL, NORMALIZE_NONE, Normalization


@pytest.mark.parametrize(("value", "expected"), [
    (True, NORMALIZE_ALL), (False, NORMALIZE_NONE), ({"urls": False}, Normalization(off=frozenset({"urls"}))),
    ({"urls": True}, NORMALIZE_ALL),
])
def test_a_request_and_a_configure_carry_the_option_and_round_trip(value: object, expected: Normalization) -> None:
    request = parse_request(json.dumps({"text": "Hi.", "normalize": value}))
    assert request.normalize == expected
    assert parse_request(json.dumps(request.to_json())) == request
    configure = parse_client_message(json.dumps({"type": "configure", "normalize": value}))
    assert configure == Configure(normalize=expected)
    assert parse_client_message(encode_client_message(configure)) == configure


def test_on_by_default_and_echoed_in_the_session_settings() -> None:
    assert parse_request(b'{"text": "Hi."}').normalize == NORMALIZE_ALL
    assert SynthesisRequest(text="Hi.").to_json().get("normalize") is None  # the default stays off the wire
    assert parse_client_message('{"type": "configure"}') == Configure(normalize=None)  # unset: keep the session's
    assert SessionSettings(voice="af_heart").to_json()["normalize"] is True
    assert SessionSettings(voice="af_heart", normalize=NORMALIZE_NONE).to_json()["normalize"] is False


@pytest.mark.parametrize(("value", "field"), [
    ('"yes"', "normalize"), ("1", "normalize"), ('{"colours": false}', "normalize.colours"),
    ('{"urls": "off"}', "normalize.urls"),
])
def test_a_bad_value_names_the_field(value: str, field: str) -> None:
    for raw in (f'{{"text": "Hi.", "normalize": {value}}}', f'{{"type": "configure", "normalize": {value}}}'):
        with pytest.raises(ProtocolError) as error:
            parse_request(raw) if '"text"' in raw else parse_client_message(raw)
        assert error.value.field == field
