"""Word timestamps through the agent, against the real Kokoro server: the turn forwards them on
its audio clock, and a barge-in leaves only the words the listener heard in the conversation."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from agent_harness import ANSWER, scripted
from strands import Agent

from voice_agent.heard import CUT_MARK
from voice_agent.messages import PromptRequest
from voice_agent.speaking import Audio, Turn, TurnRegistry
from voicestream.clients import connect_local
from voicestream.protocol import PCM_BYTES_PER_MS


async def run_turn(tts_url: str, *, interrupt_at_word: int | None = None) -> tuple[list[Any], Agent, Turn]:
    """One bidi turn; with ``interrupt_at_word``, barge in once that word's audio has come, saying
    the listener heard up to its end (as the page would, from Web Audio)."""
    agent = Agent(model=scripted(), callback_handler=None)

    async def connect() -> Any:
        return await connect_local(tts_url, raise_errors=False)

    turn = Turn(number=1, request=PromptRequest(prompt="hi"), agent=agent, connect_tts=connect,
                registry=TurnRegistry())
    items: list[Any] = []
    async for item in turn.events():
        items.append(item if isinstance(item, Audio) else item.to_wire())  # events as a client reads them
        if interrupt_at_word is None or turn.interrupted:
            continue
        words = [w for i in items if isinstance(i, dict) and i["type"] == "words" for w in i["words"]]
        received_ms = sum(len(i.data) for i in items if isinstance(i, Audio)) / PCM_BYTES_PER_MS
        if len(words) > interrupt_at_word and received_ms >= words[interrupt_at_word]["end_ms"]:
            await turn.interrupt(heard_ms=words[interrupt_at_word]["end_ms"])  # it played up to there
    return items, agent, turn


def test_the_turn_forwards_word_events_on_its_audio_clock(tts_url: str) -> None:
    items, agent, _ = asyncio.run(run_turn(tts_url))
    events = [i for i in items if isinstance(i, dict)]
    words_events = [e for e in events if e["type"] == "words"]
    words = [w for e in words_events for w in e["words"]]
    assert [w["text"] for w in words] == re.findall(r"[A-Za-z]+", ANSWER)
    starts = [w["start_ms"] for w in words]
    assert starts == sorted(starts) and all(w["start_ms"] <= w["end_ms"] for w in words)
    audio_ms = events[-1]["audio_ms"]
    assert words[-1]["end_ms"] <= audio_ms + 1  # the clock is the turn's audio
    for event in words_events:  # each utterance's words come before its audio
        first_audio = next(
            n for n, i in enumerate(items) if isinstance(i, Audio) and i.utterance_id == event["utterance_id"]
        )
        assert items.index(event) < first_audio
    assert agent.messages[-1]["content"][0]["text"] == ANSWER  # not interrupted: the history is whole


def test_a_barge_in_keeps_only_the_heard_words_in_the_history(tts_url: str) -> None:
    items, agent, _ = asyncio.run(run_turn(tts_url, interrupt_at_word=2))  # "Hello from the"
    end = items[-1]
    assert end["type"] == "end" and end["interrupted"] is True
    assert agent.messages[-1] == {**agent.messages[-1], "role": "assistant"}
    assert agent.messages[-1]["content"] == [{"text": f"Hello from the{CUT_MARK}"}]
    assert end["heard_ms"] > 0


def test_cutting_a_finished_turn_short_keeps_what_was_heard(tts_url: str) -> None:
    """The agent sends audio faster than it plays: the listener often stops it after the turn ended."""
    items, agent, turn = asyncio.run(run_turn(tts_url))
    words = [w for i in items if isinstance(i, dict) and i["type"] == "words" for w in i["words"]]
    assert turn.cut_short(words[6]["end_ms"]) is True  # ... "speaking right"
    assert agent.messages[-1]["content"] == [{"text": f"Hello from the offline model, speaking right{CUT_MARK}"}]
    assert turn.cut_short(words[7]["end_ms"]) is False  # once
