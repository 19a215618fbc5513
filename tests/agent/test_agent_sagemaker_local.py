"""The agent's whole turn with its TTS on the SageMaker transport: its own connector (config
``tts_endpoint``), the real HTTP/2 SDK, the SageMaker stand-in and the REAL tiny-model Kokoro server.
The agent is pointed at the stand-in only through the environment (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME,
AWS_CA_BUNDLE), exactly as an operator would."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
import uvicorn
from agent_harness import ANSWER, PIECES, RunningAgent, free_port, poll, scripted
from agent_wire import ws_open, ws_turn

from sagemaker_local_fixture import SageMakerLocal
from voice_agent.app import create_app
from voice_agent.config import AgentConfig


@contextlib.contextmanager
def serve_sagemaker_agent(standin: SageMakerLocal) -> Iterator[RunningAgent]:
    config = AgentConfig(model="offline", offline_reason="tests", tts_endpoint=standin.endpoint_name,
                         region=standin.region, max_prompt_chars=500)
    app = create_app(config=config, models=lambda: scripted())
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name=f"agent-sm-{port}", daemon=True)
    thread.start()
    if not poll(lambda: server.started or not thread.is_alive(), timeout=30):
        raise RuntimeError("the agent did not start")
    try:
        yield RunningAgent(url=f"http://127.0.0.1:{port}", app=app)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def test_agent_speaks_a_whole_turn_through_the_sagemaker_stand_in(
    sagemaker_local: SageMakerLocal, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    for name, value in sagemaker_local.client_env().items():
        monkeypatch.setenv(name, value)
    with serve_sagemaker_agent(sagemaker_local) as agent:
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
        assert poll(agent.idle, timeout=15), agent.running()
