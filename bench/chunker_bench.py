"""Throughput of the sentence chunker on LLM-like markdown fed in ~4-character fragments.

An LLM token is ~4 characters, so this is the shape of the agent's real feed() traffic. Run:
``.venv/bin/python -m bench.chunker_bench`` (prints JSON).
"""

from __future__ import annotations

import json
import random
import time

from voicestream.chunker import IncrementalSentenceChunker

_PARAGRAPHS = (
    "Sure, here is how to set it up. Dr. Smith's team at the U.S. office uses v1.2.3 on "
    "192.168.0.1, e.g. for the 3.14 release. It costs $3.50 per hour, i.e. about 10.30 a day.",
    "## Installation\n\n1. Install the CLI with `pip install voice`.\n2. Run **deploy** "
    "from the [docs](https://example.com/a.b?c=d).\n- first item\n- second item",
    "Wait... what? Really?! He said \"stop.\" Then he left (see above.) and came back at "
    "9 a.m. The rest, as they say, is history; or so the story goes: nobody knows.",
    "你好。我们今天讨论语音合成！这个系统怎么样？नमस्ते। سؤال؟ Fin.",
    "| Name | Value |\n|---|---|\n| alpha | 1,000 |\n\n```python\nprint('code')\n```\n"
    "> A quoted line with _emphasis_ and ~~strike~~ text, "
    "written by J. R. R. Tolkien.",
)


def _text(size_kb: int) -> str:
    """Deterministic LLM-like text of about ``size_kb`` KiB."""
    rng = random.Random(7)
    parts: list[str] = []
    total = 0
    while total < size_kb * 1024:
        para = rng.choice(_PARAGRAPHS)
        parts.append(para)
        total += len(para.encode()) + 2
    return "\n\n".join(parts)


def _fragments(text: str) -> list[str]:
    """Cut into 1-7 character fragments (mean 4, like LLM tokens)."""
    rng = random.Random(11)
    out: list[str] = []
    i = 0
    while i < len(text):
        step = rng.randint(1, 7)
        out.append(text[i : i + step])
        i += step
    return out


def measure(*, repeats: int = 5, size_kb: int = 256) -> dict[str, float | int]:
    """Best of ``repeats`` runs: MB/s of UTF-8 input, µs per feed() call, fragments per run."""
    text = _text(size_kb)
    fragments = _fragments(text)
    size_mb = len(text.encode()) / 1e6
    best = float("inf")
    pieces = 0
    for _ in range(repeats):
        chunker = IncrementalSentenceChunker()
        feed = chunker.feed
        count = 0
        t0 = time.perf_counter()
        for fragment in fragments:
            count += len(feed(fragment))
        count += len(chunker.flush())
        best = min(best, time.perf_counter() - t0)
        pieces = count
    return {
        "mb_per_s": round(size_mb / best, 3),
        "us_per_fragment": round(best / len(fragments) * 1e6, 3),
        "fragments": len(fragments),
        "pieces": pieces,
        "size_mb": round(size_mb, 3),
        "repeats": repeats,
    }


if __name__ == "__main__":
    print(json.dumps(measure()))
