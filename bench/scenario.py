"""The simulated agent answer and its token pacing.

An assistant answers a question in six short paragraphs. The answer is cut into ~4-character
tokens (an LLM token is about four characters of English) and released on a fixed schedule:
one token every ``interval_s`` after a first-token delay, chosen so that the sentence chunker
releases the first sentence ~600 ms after the answer starts and the last token arrives ~5 s after
it. Time zero is the start of the agent's answer; every benchmark time is measured from it.

Everything here is deterministic (a fixed text, a seeded cut, a computed schedule), so two runs
of the benchmark feed the server exactly the same stream.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from voicestream.chunker import IncrementalSentenceChunker

#: The agent's answer to "My home Wi-Fi is slow in half the house. Can I fix that myself?"
ANSWER_PARAGRAPHS: tuple[str, ...] = (
    "Yes, there are a few simple fixes you can try, and most take only minutes. "
    "Start with where the router sits.",
    "Routers work best in the open, up high and near the middle of your home. "
    "Walls, mirrors and fish tanks all soak up the signal.",
    "Next, check which channel it uses. "
    "If your neighbours share it, switching to a quieter one often doubles your speed.",
    "It also helps to update the firmware. "
    "Vendors fix bugs and add features, so an old router may be slower than it should be.",
    "If some rooms still struggle, a mesh system is worth a look. "
    "Two or three small units will cover most houses evenly.",
    "Finally, run a speed test after each change, so you know what actually helped. "
    "Let me know what you find, and we can go from there.",
)

#: One sentence of the answer, used for the per-codec requests (one model chunk).
CODEC_TEXT = "Walls, mirrors and fish tanks all soak up the signal."

FIRST_SENTENCE_S = 0.6
ANSWER_S = 5.0
TOKEN_SEED = 4
MIN_TOKEN_CHARS = 2
MAX_TOKEN_CHARS = 6


def answer_text(paragraphs: int | None = None) -> str:
    """The answer (its first ``paragraphs`` paragraphs), paragraphs separated by a blank line."""
    parts = ANSWER_PARAGRAPHS if paragraphs is None else ANSWER_PARAGRAPHS[:paragraphs]
    if not parts:
        raise ValueError("paragraphs must be at least 1")
    return "\n\n".join(parts)


def tokenize(text: str, *, seed: int = TOKEN_SEED) -> list[str]:
    """Cut ``text`` into tokens of 2-6 characters (mean 4), deterministically."""
    rng = random.Random(seed)
    tokens: list[str] = []
    i = 0
    while i < len(text):
        step = rng.randint(MIN_TOKEN_CHARS, MAX_TOKEN_CHARS)
        tokens.append(text[i : i + step])
        i += step
    return tokens


def first_piece_token(tokens: list[str], *, early_first_fragment: bool = False) -> int:
    """Index of the token whose arrival makes the chunker release its first piece."""
    chunker = IncrementalSentenceChunker(early_first_fragment=early_first_fragment)
    for index, token in enumerate(tokens):
        if chunker.feed(token):
            return index
    return len(tokens) - 1  # released by flush, after the last token


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A token stream: ``tokens[i]`` is released ``times[i]`` seconds after time zero."""

    name: str
    tokens: tuple[str, ...]
    times: tuple[float, ...]
    paragraphs: int

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def answer_s(self) -> float:
        """When the last token arrives (the agent's answer is complete)."""
        return self.times[-1]

    @property
    def first_token_s(self) -> float:
        return self.times[0]

    @property
    def interval_s(self) -> float:
        return (self.times[-1] - self.times[0]) / max(1, len(self.times) - 1)

    def first_sentence_s(self) -> float:
        """When the (non-early) chunker releases the first sentence."""
        return self.times[first_piece_token(list(self.tokens))]

    def first_fragment_s(self) -> float:
        """When the early-first-fragment chunker (the agent's) releases its first piece."""
        return self.times[first_piece_token(list(self.tokens), early_first_fragment=True)]

    def first_piece(self, *, early_first_fragment: bool) -> str:
        chunker = IncrementalSentenceChunker(early_first_fragment=early_first_fragment)
        for token in self.tokens:
            pieces = chunker.feed(token)
            if pieces:
                return str(pieces[0])
        return str(chunker.flush()[0])

    def truncated(self, paragraphs: int) -> Scenario:
        """The same stream, same pacing, stopped after ``paragraphs`` paragraphs."""
        if paragraphs >= self.paragraphs:
            return self
        return self._cut(len(answer_text(paragraphs)), name=f"{self.name}[:{paragraphs}]", paragraphs=paragraphs)

    def first_sentence_only(self) -> Scenario:
        """The same stream, same pacing, stopped after its first sentence."""
        sentence = self.first_piece(early_first_fragment=False)
        end = self.text.index(sentence) + len(sentence)
        return self._cut(end, name=f"{self.name}[first sentence]", paragraphs=1)

    def _cut(self, target: int, *, name: str, paragraphs: int) -> Scenario:
        count = 0
        chars = 0
        for token in self.tokens:
            if chars >= target:
                break
            chars += len(token)
            count += 1
        tokens = list(self.tokens[:count])
        tokens[-1] = tokens[-1][: len(tokens[-1]) - (chars - target)]  # drop what follows the cut
        return Scenario(name=name, tokens=tuple(tokens), times=self.times[:count], paragraphs=paragraphs)

    def summary(self) -> dict[str, object]:
        return {
            "name": self.name,
            "paragraphs": self.paragraphs,
            "chars": len(self.text),
            "tokens": len(self.tokens),
            "mean_token_chars": round(len(self.text) / len(self.tokens), 2),
            "first_token_ms": round(self.first_token_s * 1000, 1),
            "token_interval_ms": round(self.interval_s * 1000, 2),
            "first_fragment_ms": round(self.first_fragment_s() * 1000, 1),
            "first_sentence_ms": round(self.first_sentence_s() * 1000, 1),
            "answer_ms": round(self.answer_s * 1000, 1),
            "first_fragment_text": self.first_piece(early_first_fragment=True),
            "first_sentence_text": self.first_piece(early_first_fragment=False),
        }


def agent_answer(*, first_sentence_s: float = FIRST_SENTENCE_S, answer_s: float = ANSWER_S) -> Scenario:
    """The six-paragraph answer, paced so the first sentence is out at ``first_sentence_s`` and
    the whole answer at ``answer_s``: tokens at a constant interval after a first-token delay."""
    tokens = tokenize(answer_text())
    k = first_piece_token(tokens)
    last = len(tokens) - 1
    if not 0 < k < last or answer_s <= first_sentence_s:
        raise ValueError("the schedule needs a first sentence that ends before the answer does")
    interval = (answer_s - first_sentence_s) / (last - k)
    first = first_sentence_s - k * interval
    if first < 0:
        raise ValueError(f"the first sentence is too long for {first_sentence_s} s at this token rate")
    times = tuple(first + i * interval for i in range(len(tokens)))
    return Scenario(name="wifi-answer", tokens=tuple(tokens), times=times, paragraphs=len(ANSWER_PARAGRAPHS))


async def play(
    scenario: Scenario,
    t_zero: float,
    on_token: Callable[[float, str], object],
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Call ``on_token(t, token)`` for each token at ``t_zero + times[i]`` (absolute deadlines,
    so a late wake-up never shifts the rest of the schedule). ``on_token`` may be async."""
    for token, at in zip(scenario.tokens, scenario.times, strict=True):
        delay = t_zero + at - clock()
        if delay > 0:
            await asyncio.sleep(delay)
        result = on_token(clock() - t_zero, token)
        if asyncio.iscoroutine(result):
            await result


async def tokens_of(scenario: Scenario, t_zero: float) -> AsyncIterator[tuple[float, str]]:
    """The paced stream as an async iterator of (seconds since time zero, token)."""
    for token, at in zip(scenario.tokens, scenario.times, strict=True):
        delay = t_zero + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield time.perf_counter() - t_zero, token
