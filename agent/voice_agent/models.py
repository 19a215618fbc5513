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
# What the offline model says in Kokoro's other languages, when asked in one (language_of): two
# sentences each, so the page shows a Japanese voice reading Japanese with no AWS account.
ANSWERS_BY_LANGUAGE: dict[str, str] = {
    "e": "Esta es la respuesta del modelo sin conexión. Cada frase se lee en cuanto está completa.",
    "f": "Voici la réponse du modèle hors ligne. Chaque phrase est lue dès qu'elle est complète.",
    "h": "यह ऑफ़लाइन मॉडल का जवाब है। हर वाक्य पूरा होते ही बोला जाता है।",
    "i": "Questa è la risposta del modello offline. Ogni frase viene letta appena è completa.",
    "j": "オフラインのモデルが日本語でお答えします。文ができるたびに、すぐに読み上げます。",
    "p": "Esta é a resposta do modelo offline. Cada frase é lida assim que fica completa.",
    "z": "这是离线模型的中文回答。每写完一句话，就会马上读出来。",
}
# Words that tell the Latin-script languages apart (an LLM answers in the user's language; the
# scripted model guesses it from these, else answers in English).
_HINTS: dict[str, frozenset[str]] = {
    "e": frozenset("hola qué cómo dónde cuándo estás gracias usted muy pero hoy favor".split()),
    "f": frozenset("bonjour merci je vous quoi où pourquoi oui très ça".split()),
    "i": frozenset("ciao grazie sei sono gli della perché dove buongiorno molto".split()),
    "p": frozenset("olá obrigado obrigada você não tudo bem onde porque muito".split()),
}
_CJK = "\u3000-\u30ff\u3400-\u9fff\uff00-\uffef"
# A CJK "token" is one to three characters, as LLM deltas carry them; elsewhere a word and its space.
_TOKEN = re.compile(rf"[{_CJK}]{{1,3}}\s*|[^\s{_CJK}]+\s*|\s+")


def tokenize(text: str) -> list[str]:
    """Word-sized tokens, each with its trailing space, the way LLM deltas usually look."""
    return _TOKEN.findall(text)


def language_of(prompt: str) -> str:
    """The Kokoro language code the prompt is written in, as far as its script and a few common
    words tell: kana -> j, Han -> z, Devanagari -> h, Spanish/French/Italian/Portuguese words, else a."""
    if re.search("[\u3040-\u30ff]", prompt):
        return "j"
    if re.search("[\u4e00-\u9fff]", prompt):
        return "z"
    if re.search("[\u0900-\u097f]", prompt):
        return "h"
    words = set(re.findall(r"[^\W\d_]+", prompt.lower()))
    hits = {code: len(words & hints) for code, hints in _HINTS.items()}
    best = max(hits, key=lambda code: hits[code])
    return best if hits[best] else "a"


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
        """The scripted answer for ``prompt``: in its language (one of Kokoro's), chosen by its
        content, so a test can predict it."""
        spoken = ANSWERS_BY_LANGUAGE.get(language_of(prompt))
        if spoken is not None:
            return spoken
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
