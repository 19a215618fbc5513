"""The agent's parts without servers: request validation, configuration, the scripted model, and
the speaking loop against an in-memory TTS session that logs what it was sent and when."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_harness import ANSWER, PIECES, scripted
from strands import Agent

from voice_agent.config import AgentConfig, ConfigError, load_config
from voice_agent.messages import InterruptRequest, Mode, PromptRequest, decode_message, parse_request
from voice_agent.models import tokenize
from voice_agent.speaking import Audio, Turn, TurnRegistry
from voicestream.clients.events import AudioChunk, Cancelled, TtsEvent, TurnEnd, UtteranceEnd, UtteranceStart
from voicestream.protocol import ProtocolError


class FakeTts:
    """Speaks each utterance as ``chunks`` frames, ``delay`` seconds apart; logs every call and
    every frame in one list, so a test can see what overlapped."""

    def __init__(self, *, chunks: int = 4, delay: float = 0.05) -> None:
        self.log: list[tuple[str, ...]] = []
        self._chunks = chunks
        self._delay = delay
        self._work: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.cancelled = False

    async def configure(self, **settings: Any) -> None:
        self.log.append(("configure", str(settings.get("voice"))))

    async def speak(self, text: str, *, id: str | None = None) -> str:
        self.log.append(("speak", str(id)))
        self._work.put_nowait(("speak", str(id)))
        return str(id)

    async def flush(self) -> None:
        self.log.append(("flush",))
        self._work.put_nowait(("flush", ""))

    async def cancel(self) -> None:
        self.log.append(("cancel",))
        self.cancelled = True
        self._work.put_nowait(("cancel", ""))

    async def close(self) -> None:
        self.log.append(("close",))

    async def events(self) -> AsyncIterator[TtsEvent]:
        while True:
            kind, uid = await self._work.get()
            if kind == "flush":
                yield TurnEnd(turn=1, utterances=0, audio_ms=0)
                return
            if kind == "cancel" or self.cancelled:
                yield Cancelled(turn=1, ids=())
                return
            yield UtteranceStart(id=uid, turn=1)
            for i in range(self._chunks):
                await asyncio.sleep(self._delay)
                if self.cancelled:
                    break
                self.log.append(("audio", uid, str(i)))
                yield AudioChunk(utterance_id=uid, data=b"\x01\x00" * 240)
            yield UtteranceEnd(id=uid, turn=1)


async def run_turn(*, mode: Mode, tts: FakeTts, interrupt_after_audio: int | None = None) -> list[Any]:
    registry = TurnRegistry()

    async def connect() -> Any:
        return tts

    turn = Turn(number=1, request=PromptRequest(prompt="hi", mode=mode),
                agent=Agent(model=scripted(), callback_handler=None), connect_tts=connect, registry=registry,
                voice="af_heart")
    items: list[Any] = []
    async for item in turn.events():
        items.append(item if isinstance(item, Audio) else item.to_wire())  # events as a client reads them
        if interrupt_after_audio is not None and sum(isinstance(i, Audio) for i in items) == interrupt_after_audio:
            await turn.interrupt()
    assert registry.snapshot() == {"turns": 0, "tts_sessions": 0}
    return items


def test_bidi_sends_the_next_sentence_while_the_previous_one_is_still_streaming() -> None:
    tts = FakeTts(chunks=4, delay=0.08)
    items = asyncio.run(run_turn(mode="bidi", tts=tts))
    speaks = [entry[1] for entry in tts.log if entry[0] == "speak"]
    assert speaks == ["1.1", "1.2", "1.3", "1.4"]
    last_audio_of_first = tts.log.index(("audio", "1.1", "3"))
    assert tts.log.index(("speak", "1.2")) < last_audio_of_first  # pipelined, one session
    assert tts.log[0] == ("configure", "af_heart") and tts.log[-1] == ("close",)
    assert tts.log.index(("flush",)) > tts.log.index(("speak", "1.4"))
    audio = [i for i in items if isinstance(i, Audio)]
    assert [a.utterance_id for a in audio] == [f"1.{n}" for n in range(1, 5) for _ in range(4)]
    assert [a.seq for a in audio] == list(range(1, 17))
    assert items[-1]["type"] == "end" and items[-1]["audio_chunks"] == 16


def test_batch_speaks_only_after_the_whole_answer() -> None:
    tts = FakeTts(chunks=1, delay=0.0)
    items = asyncio.run(run_turn(mode="batch", tts=tts))
    types = [i["type"] if isinstance(i, dict) else "audio" for i in items]
    text_end = types.index("text_end")
    assert all(i > text_end for i, t in enumerate(types) if t in ("sentence", "audio", "first_audio"))
    assert [i["text"] for i in items if isinstance(i, dict) and i["type"] == "sentence"] == PIECES


def test_interrupt_cancels_the_tts_turn_and_emits_nothing_after() -> None:
    tts = FakeTts(chunks=20, delay=0.02)
    items = asyncio.run(run_turn(mode="bidi", tts=tts, interrupt_after_audio=2))
    types = [i["type"] if isinstance(i, dict) else "audio" for i in items]
    assert types[-2:] == ["interrupted", "end"]
    assert types.count("audio") == 2
    assert ("cancel",) in tts.log and ("flush",) not in tts.log
    assert items[-1]["interrupted"] is True


@pytest.mark.parametrize("payload, code, field", [
    ({"prompt": ""}, "empty_prompt", "prompt"),
    ({"prompt": "x" * 11}, "prompt_too_long", "prompt"),
    ({"prompt": "hi", "mode": "stream"}, "unknown_mode", "mode"),
    ({"prompt": "hi", "voice": ""}, "invalid_field", "voice"),
    ({"type": "interrupt", "now": True}, "invalid_field", "now"),
    ({"type": None}, "unknown_type", "type"),
    ("hello", "invalid_json", None),
])
def test_parse_request_names_the_problem(payload: object, code: str, field: str | None) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_request(payload, max_prompt_chars=10, allow_interrupt=True)
    assert (caught.value.code, caught.value.field) == (code, field)


def test_parse_request_accepts_both_shapes() -> None:
    assert parse_request({"prompt": "hi"}, max_prompt_chars=10, allow_interrupt=True) == PromptRequest(prompt="hi")
    assert parse_request({"type": "prompt", "prompt": "hi", "mode": "batch", "voice": "v"}, max_prompt_chars=10,
                         allow_interrupt=False) == PromptRequest(prompt="hi", mode="batch", voice="v")
    assert parse_request({"type": "interrupt"}, max_prompt_chars=10, allow_interrupt=True) == InterruptRequest()
    heard = parse_request({"type": "interrupt", "heard_ms": 1250}, max_prompt_chars=10, allow_interrupt=True)
    assert heard == InterruptRequest(heard_ms=1250)
    for bad in (-1, 1.5, "1s", True):
        with pytest.raises(ProtocolError) as caught:
            parse_request({"type": "interrupt", "heard_ms": bad}, max_prompt_chars=10, allow_interrupt=True)
        assert caught.value.field == "heard_ms"
    with pytest.raises(ProtocolError):
        parse_request({"type": "interrupt"}, max_prompt_chars=10, allow_interrupt=False)
    with pytest.raises(ProtocolError, match="over"):
        decode_message(b"{" * 70_000)


def test_config_falls_back_to_offline_and_says_why() -> None:
    assert load_config(env={}, credentials_probe=lambda: False).offline_reason == "no AWS credentials were found"
    online = load_config(env={"BEDROCK_MODEL_ID": "m", "AWS_REGION": "eu-west-1"}, credentials_probe=lambda: True)
    assert (online.model, online.model_id, online.region, online.serve_page) == ("bedrock", "m", "eu-west-1", False)
    assert load_config(env={"AGENT_MODEL": "offline"}, credentials_probe=lambda: True).model == "offline"
    assert load_config(env={}, offline=True, credentials_probe=lambda: True).offline_reason == "--offline was given"
    local = load_config(env={"TTS_ENDPOINT_NAME": "ep"}, tts_url="http://h:1", credentials_probe=lambda: True)
    assert (local.tts_kind, local.tts_endpoint, local.serve_page) == ("local", None, True)
    assert load_config(env={"TTS_ENDPOINT_NAME": "ep"}, credentials_probe=lambda: True).tts_kind == "sagemaker"
    with pytest.raises(ConfigError):
        load_config(env={"AGENT_MODEL": "gpt"})
    with pytest.raises(ConfigError):
        AgentConfig(model="offline", tts_url="http://h:1", tts_endpoint="ep")


def test_scripted_model_streams_its_answer_token_by_token() -> None:
    assert "".join(tokenize(ANSWER)) == ANSWER and len(tokenize(ANSWER)) == len(ANSWER.split())

    async def collect() -> list[str]:
        agent = Agent(model=scripted(token_ms=(0, 1)), callback_handler=None)
        return [event["data"] async for event in agent.stream_async("hi") if "data" in event]

    deltas = asyncio.run(collect())
    assert "".join(deltas) == ANSWER and len(deltas) > 10
