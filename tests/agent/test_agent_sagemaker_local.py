"""The agent's whole turn with its TTS on the SageMaker transport: its own connector (config
``tts_endpoint``), the real HTTP/2 SDK, the SageMaker stand-in and the REAL tiny-model Kokoro server.
The agent is pointed at the stand-in only through the environment (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME,
AWS_CA_BUNDLE), exactly as an operator would."""

from __future__ import annotations

import pytest
from agent_harness import ANSWER, PIECES, serve_agent
from agent_wire import ws_open, ws_turn
from sagemaker_local_fixture import SageMakerLocal
from waiting import wait_until


def test_agent_speaks_a_whole_turn_through_the_sagemaker_stand_in(
    sagemaker_local: SageMakerLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in sagemaker_local.client_env().items():
        monkeypatch.setenv(name, value)
    with serve_agent(tts_url=None, tts_endpoint=sagemaker_local.endpoint_name,
                     region=sagemaker_local.region) as agent:
        ws, ready = ws_open(agent.ws_url)
        with ws:
            assert ready["tts"] == "sagemaker"
            log = ws_turn(ws, {"prompt": "Tell me something.", "mode": "bidi"})
        assert log.text == ANSWER and log.sentences == PIECES
        assert "error" not in log.types, log.of("error")
        end = log.end
        assert end["tts_ok"] is True and end["interrupted"] is False
        assert end["audio_bytes"] == sum(len(a) for a in log.audio) > 0
        assert all(len(a) % 2 == 0 for a in log.audio)
        assert wait_until(agent.idle, timeout=15), agent.running()
