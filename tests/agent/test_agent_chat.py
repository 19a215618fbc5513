"""`deploy-agent chat` against the local agent (the same SSE stream AgentCore passes through)."""

from __future__ import annotations

import io
import wave
from pathlib import Path

from agent_harness import ANSWER, RunningAgent

from cli.agent_chat import Transport, run_turn, save_wav


def test_chat_prints_text_collects_speech_and_keeps_the_session(agent: RunningAgent, tmp_path: Path) -> None:
    transport = Transport(url=agent.url, runtime_arn=None)
    out, err = io.StringIO(), io.StringIO()
    first = run_turn(transport, {"prompt": "Hello?", "mode": "bidi"}, out=out, err=err)
    second = run_turn(transport, {"prompt": "And then?", "mode": "batch"}, out=out, err=err)
    assert out.getvalue() == f"{ANSWER}\n{ANSWER}\n"
    assert first.end is not None and second.end is not None
    assert (first.end["turn"], second.end["turn"]) == (1, 2)  # one AgentCore session, one conversation
    assert len(first.audio) == first.end["audio_bytes"] > 0
    assert "[bidi: first audio" in err.getvalue() and "[batch: first audio" in err.getvalue()
    path = tmp_path / "speech.wav"
    save_wav(path, bytes(first.audio))
    with wave.open(str(path)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getnframes()) == (24_000, 1, len(first.audio) // 2)
