"""The agent keeps speaking while its TTS server is replaced (SIGTERM mid-answer, as a SageMaker
update or scale-in does): the turn ends with all its speech, each sentence once, and no error."""

from __future__ import annotations

import signal

from agent_harness import serve_agent
from agent_wire import ws_open, ws_read_turn, ws_read_until_audio, ws_turn
from healthy_router import router_thread
from kokoro_server_fixture import KokoroServer

from voicestream.launch import KokoroProcess

ANSWER = " ".join(f"Sentence {n} of an answer that keeps going while the speech server is replaced."
                  for n in range(1, 7))


def test_a_turn_keeps_all_its_speech_when_the_tts_server_stops_mid_answer(
    kokoro_server: KokoroServer, stopping_server: KokoroProcess,
) -> None:
    with serve_agent(tts_url=kokoro_server.url, answer=ANSWER) as agent:  # the same answer, no restart
        ws, _ = ws_open(agent.ws_url)
        with ws:
            reference = ws_turn(ws, {"prompt": "Go on.", "mode": "bidi"})
    with router_thread([stopping_server.url, kokoro_server.url]) as router:
        with serve_agent(tts_url=router.url, answer=ANSWER) as agent:
            ws, _ = ws_open(agent.ws_url)
            with ws:
                ws.send('{"prompt": "Go on.", "mode": "bidi"}')
                started = ws_read_until_audio(ws)
                assert stopping_server.process is not None
                stopping_server.process.send_signal(signal.SIGTERM)
                log = ws_read_turn(ws, log=started)
        routed = dict(router.routed)
    assert "error" not in log.types, log.of("error")
    assert log.end["tts_ok"] is True and log.end["interrupted"] is False
    assert log.end["sentences"] == reference.end["sentences"]
    assert log.end["audio_bytes"] == reference.end["audio_bytes"]  # every sentence once, none twice
    assert routed[stopping_server.url] >= 1 and routed[kokoro_server.url] >= 1  # the turn moved over
    assert stopping_server.process is not None and stopping_server.process.wait(timeout=30) == 0
