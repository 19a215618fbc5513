"""The metric lines' content: first audio and stall arithmetic against a real-time listener.

The clock is driven by a stand-in for ``time.perf_counter`` so the arithmetic is exact; the lines
of a real server are checked against the deployed filter patterns in tests/infra."""

from __future__ import annotations

import io
import json
import time

import pytest
from hand_clock import HandClock

from kokoro_server import metrics


def test_first_audio_and_stalls(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    clock = HandClock()
    monkeypatch.setattr(time, "perf_counter", clock)  # the time module metrics reads
    utt = metrics.UtteranceClock(route="ws", fmt="mp3")
    clock.now = 100.4
    utt.audio(seconds=0.5, synthesis_s=0.3)   # first audio 400 ms after the start; plays to 100.9
    clock.now = 100.8
    utt.audio(seconds=1.0, synthesis_s=0.3)   # in time: plays on to 101.9
    clock.now = 102.1
    utt.audio(seconds=1.0, synthesis_s=0.3)   # 200 ms late: the listener waited, resumes at 102.1
    clock.now = 103.0
    utt.audio(seconds=0.5, synthesis_s=0.1)   # due at 103.1: in time
    utt.finish()
    line = json.loads(capsys.readouterr().out)
    assert line == {"kokoro_metric": "utterance", "route": "ws", "format": "mp3", "first_audio_ms": 400,
                    "synthesis_ms": 1000, "audio_ms": 3000, "stall_ms": 200}


def test_no_audio_no_line(capsys: pytest.CaptureFixture[str]) -> None:
    metrics.UtteranceClock(route="http", fmt="wav").finish()
    assert capsys.readouterr().out == ""


def test_a_closed_stdout_never_breaks_serving() -> None:
    stream = io.StringIO()
    stream.close()
    metrics.emit(metrics.LOAD, stream=stream, sessions=1)  # no exception


def test_each_line_is_one_json_object() -> None:
    stream = io.StringIO()
    metrics.emit(metrics.LOAD, stream=stream, sessions=2, queued=0, running=1)
    (line,) = stream.getvalue().splitlines()
    assert json.loads(line) == {"kokoro_metric": "load", "sessions": 2, "queued": 0, "running": 1}
