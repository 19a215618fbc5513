"""The agent's model: Bedrock when AWS is reachable, else an offline scripted Strands model.

The scripted model streams Bedrock-shaped events token by token at an LLM-like pace, so the
whole speaking pipeline (chunker, pipelined TTS, barge-in) behaves offline as it does in AWS:
the demo runs on a laptop and the tests need no credentials.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from .config import AgentConfig

T = TypeVar("T", bound=BaseModel)

_ANSWERS: tuple[str, ...] = (
    "Here is the short answer, written one token at a time. I am the offline scripted model, "
    "so this reply needed no AWS account at all. Each sentence goes to the speech server the "
    "moment it is complete, while I keep writing the next one.",
    "Good question, and the offline model has a ready answer. Streaming speech means the first "
    "sentence plays while the rest is still being written. That is why you hear me before I "
    "have finished typing.",
    "Sure, let me walk you through it briefly. The agent cuts its text into sentences as they "
    "arrive. A single speech session per turn speaks them in order, without gaps. Press "
    "interrupt at any time and both the writing and the speaking stop.",
)
_TOKEN = re.compile(r"\S+\s*|\s+")


def tokenize(text: str) -> list[str]:
    """Word-sized tokens, each with its trailing space, the way LLM deltas usually look."""
    return _TOKEN.findall(text)


def _last_user_text(messages: Messages) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return " ".join(block["text"] for block in message.get("content", []) if "text" in block)
    return ""


class ScriptedModel(Model):
    """A Strands model that answers with canned text, paced like a real LLM stream."""

    def __init__(
        self,
        *,
        answers: Sequence[str] = _ANSWERS,
        token_ms: tuple[int, int] = (30, 60),
        first_token_ms: int = 300,
        seed: int | None = None,
    ) -> None:
        if not answers:
            raise ValueError("answers must not be empty")
        self._config: dict[str, Any] = {
            "model_id": "offline-scripted",
            "answers": tuple(answers),
            "token_ms": token_ms,
            "first_token_ms": first_token_ms,
        }
        self._random = random.Random(seed)
        self.calls = 0

    def update_config(self, **model_config: Any) -> None:
        self._config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        return dict(self._config)

    def answer_for(self, prompt: str) -> str:
        """The scripted answer for ``prompt``: chosen by its content, so a test can predict it."""
        answers: tuple[str, ...] = self._config["answers"]
        return answers[sum(prompt.encode("utf-8")) % len(answers)]

    async def structured_output(
        self, output_model: type[T], prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise NotImplementedError("the offline scripted model has no structured output")
        yield {}  # pragma: no cover (makes this an async generator, as the base class declares)

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        *,
        cancel_signal: threading.Event | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        self.calls += 1
        low, high = self._config["token_ms"]
        text = self.answer_for(_last_user_text(messages))
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {}}}
        await asyncio.sleep(self._config["first_token_ms"] / 1000)
        for token in tokenize(text):
            if cancel_signal is not None and cancel_signal.is_set():
                break  # the agent reports the cancellation itself (stop_reason "cancelled")
            yield {"contentBlockDelta": {"delta": {"text": token}}}
            await asyncio.sleep(self._random.uniform(low, high) / 1000)
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


ModelFactory = Callable[[], Model]


def model_factory(config: AgentConfig) -> ModelFactory:
    """A factory of fresh models (one per conversation) for ``config``."""
    if config.model == "offline":
        return lambda: ScriptedModel(token_ms=config.offline_token_ms, first_token_ms=config.offline_first_token_ms)

    def bedrock() -> Model:
        from strands.models import BedrockModel

        return BedrockModel(model_id=config.model_id, region_name=config.region, streaming=True)

    return bedrock
