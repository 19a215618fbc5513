"""The real agent app (offline scripted model) against a REAL Kokoro server, over both transports."""

from __future__ import annotations

import json

import pytest
from agent_harness import ANSWER, PIECES, RunningAgent, tts_idle
from agent_wire import TurnLog, sse_turn, ws_next_event, ws_open, ws_read_turn, ws_read_until_audio, ws_turn
from waiting import wait_until


def check_complete_turn(log: TurnLog, *, mode: str) -> None:
    """Order and content every finished turn must have, whatever the transport."""
    types = log.types
    assert types[0] == "start" and types[-1] == "end", types
    assert log.of("start")[0]["mode"] == mode
    assert log.text == ANSWER
    assert log.of("text_end")[0]["text"] == ANSWER
    assert log.sentences == PIECES
    assert "error" not in types, log.of("error")
    assert len(log.audio) > 0
    # Every event carries t_ms from the start of the turn, never going backwards.
    stamps = [e["t_ms"] for e in log.events]
    assert stamps == sorted(stamps) and stamps[0] >= 0
    assert log.index("first_audio") < log.first_audio_index()
    end = log.end
    assert end["interrupted"] is False and end["tts_ok"] is True
    assert end["audio_chunks"] == len(log.audio)
    assert end["audio_bytes"] == sum(len(a) for a in log.audio)
    assert all(len(a) % 2 == 0 for a in log.audio)  # whole s16 samples
    assert end["sentences"] == len(PIECES) and end["text_chars"] == len(ANSWER)


def check_mode_order(log: TurnLog, *, mode: str) -> None:
    sentence_at = [i for i, item in enumerate(log.items) if isinstance(item, dict) and item["type"] == "sentence"]
    text_end = log.index("text_end")
    if mode == "bidi":
        # Pipelined: the first pieces go to the TTS while the model is still writing.
        assert sentence_at[0] < text_end
    else:
        # Batch: the whole answer first, then speech.
        assert all(i > text_end for i in sentence_at)
        assert log.first_audio_index() > text_end


@pytest.mark.parametrize("mode", ["bidi", "batch"])
def test_ws_turn_streams_text_and_binary_audio(agent: RunningAgent, mode: str) -> None:
    ws, ready = ws_open(agent.ws_url)
    with ws:
        assert ready["model"] == "offline" and ready["tts"] == "local" and ready["sample_rate"] == 24000
        log = ws_turn(ws, {"prompt": "Tell me something.", "mode": mode})
        check_complete_turn(log, mode=mode)
        check_mode_order(log, mode=mode)
        assert log.of("start")[0]["turn"] == 1
        # The same socket takes the next prompt; turns are numbered per connection.
        again = ws_turn(ws, {"prompt": "And again?", "mode": mode})
        check_complete_turn(again, mode=mode)
        assert again.of("start")[0]["turn"] == 2


@pytest.mark.parametrize("mode", ["bidi", "batch"])
def test_sse_turn_streams_text_and_base64_audio(agent: RunningAgent, mode: str) -> None:
    log = sse_turn(agent.url, {"prompt": "Tell me something.", "mode": mode})
    check_complete_turn(log, mode=mode)
    check_mode_order(log, mode=mode)
    audio_events = log.of("audio")
    assert [e["seq"] for e in audio_events] == list(range(1, len(audio_events) + 1))
    assert [e["bytes"] for e in audio_events] == [len(a) for a in log.audio]


def test_ws_interrupt_stops_audio_and_keeps_the_session(agent: RunningAgent, tts_url: str) -> None:
    ws, _ = ws_open(agent.ws_url)
    with ws:
        ws.send(json.dumps({"prompt": "Talk for a while."}))
        log = ws_read_until_audio(ws)  # barge in once speech has started
        ws.send(json.dumps({"type": "interrupt"}))
        ws_read_turn(ws, log=log)
        after = log.index("interrupted")
        assert not any(isinstance(item, bytes) for item in log.items[after:]), "audio after interrupted"
        assert log.types[-2:] == ["interrupted", "end"]
        assert log.end["interrupted"] is True and log.end["stop_reason"] == "interrupted"
        # Nothing of the interrupted turn is left running, here or on the TTS server.
        assert wait_until(agent.idle), agent.running()
        assert wait_until(lambda: tts_idle(tts_url)), "TTS server still busy after the interrupt"
        # A second interrupt has nothing to stop: an error, and the socket stays usable.
        ws.send(json.dumps({"type": "interrupt"}))
        assert ws_next_event(ws)["code"] == "not_running"
        full = ws_turn(ws, {"prompt": "Next question."})
        check_complete_turn(full, mode="bidi")
        assert sum(map(len, log.audio)) < sum(map(len, full.audio))  # the interrupted turn was cut short


BAD_INPUTS: list[tuple[str | bytes, str, str | None]] = [
    ('{"prompt": ""}', "empty_prompt", "prompt"),
    ('{"prompt": "   "}', "empty_prompt", "prompt"),
    (json.dumps({"prompt": "x" * 501}), "prompt_too_long", "prompt"),
    ('{"prompt": "hi", "mode": "loud"}', "unknown_mode", "mode"),
    ('{"prompt": "hi", "mood": "calm"}', "invalid_field", "mood"),
    ('{"prompt": 42}', "invalid_field", "prompt"),
    ('{"mode": "bidi"}', "missing_field", "prompt"),
    ('{"type": "dance"}', "unknown_type", "type"),
    ('{"prompt": "hi"', "invalid_json", None),
    ("[1, 2]", "invalid_json", None),
    (b"\xff\xfe", "invalid_json", None),
    ("x" * 70_000, "message_too_large", None),
]


def test_ws_bad_inputs_get_error_events_and_the_session_stays_open(agent: RunningAgent) -> None:
    ws, _ = ws_open(agent.ws_url)
    with ws:
        for raw, code, field in BAD_INPUTS:
            ws.send(raw)
            event = ws_next_event(ws)
            assert (event["type"], event["code"], event.get("field")) == ("error", code, field), raw[:60]
            assert event["message"]
        check_complete_turn(ws_turn(ws, {"prompt": "Still there?"}), mode="bidi")


def test_ws_prompt_while_speaking_is_refused_as_busy(agent: RunningAgent) -> None:
    ws, _ = ws_open(agent.ws_url)
    with ws:
        ws.send(json.dumps({"prompt": "First."}))
        assert ws_next_event(ws)["type"] == "start"
        ws.send(json.dumps({"prompt": "Second, too soon."}))
        log = ws_read_turn(ws)
        busy = [e for e in log.of("error") if e["code"] == "busy"]
        assert len(busy) == 1
        assert log.text == ANSWER and log.end["interrupted"] is False


@pytest.mark.parametrize("raw, code, field", BAD_INPUTS, ids=[f"{i}-{c}" for i, (_, c, _) in enumerate(BAD_INPUTS)])
def test_sse_bad_inputs_get_an_error_event(agent: RunningAgent, raw: str | bytes, code: str, field: str | None) -> None:
    body = raw.encode() if isinstance(raw, str) else raw
    log = sse_turn(agent.url, None, raw=body)
    assert log.types == ["error"]
    assert (log.events[0]["code"], log.events[0].get("field")) == (code, field)


def test_sse_interrupt_without_a_running_turn(agent: RunningAgent) -> None:
    log = sse_turn(agent.url, {"type": "interrupt"})
    assert [(e["type"], e["code"]) for e in log.events] == [("error", "not_running")]
