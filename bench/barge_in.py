"""``python -m bench.barge_in``: the next answer's first audio right after a barge-in, over a fresh one's.

    python -m bench.barge_in --model-dir DIR [--rounds N] [--hold-s S] [--out bench/results/barge_in-ENGINE.json]

A voice agent's caller interrupts; the agent's next answer should start as soon as a fresh one
would. Each round, on one session (the plugins keep theirs between answers): a fresh short answer,
its first audio timed from its ``speak``; a pause; then a long answer sent as the plugins send it
(one ``speak`` per sentence, pipelined), cancelled ``--hold-s`` after its first audio (its next
window is then on the model), and the short answer at once, timed the same way. Two servers on the
same model answer every round, one after the other: the production one, and ``no_halt``
(bench/variants.py: a cancelled window runs to its end, as before issue 43), so the ratio's gain is
attributed to halting, measured in the same run. ``make bench`` runs it on both engines
(docs/benchmarks.md reads the results).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from voicestream.chunker import iter_sentences
from voicestream.clients import AudioChunk, Cancelled, TtsSession, TurnEnd, connect_local

from .models import kokoro_python
from .scenario import answer_text
from .server import ServerProcess

SHORT = "Okay, stopping there. What would you like to do next?"
SIDES = {"production": (), "no_halt": ("no_halt",)}
WAIT_S = 60.0  # any one wait on the server; a wedged server fails the run


async def _until(session: TtsSession, kind: type[Any]) -> Any:
    """Read events up to the first of ``kind``."""
    async def read() -> Any:
        async for event in session.events():
            if isinstance(event, kind):
                return event
        raise RuntimeError("the session ended")
    return await asyncio.wait_for(read(), WAIT_S)


async def short_answer(session: TtsSession) -> float:
    """Seconds from the short answer's ``speak`` to its first audio; reads to its turn's end."""
    began = time.perf_counter()
    await session.speak(SHORT)
    await session.flush()
    await _until(session, AudioChunk)
    first = time.perf_counter() - began
    await _until(session, TurnEnd)
    return first


async def one_round(url: str, long_sentences: list[str], hold_s: float) -> dict[str, float]:
    async with await connect_local(url) as session:
        await session.configure(format="pcm", sample_rate=24000)
        fresh = await short_answer(session)
        await asyncio.sleep(1.0)  # the listener hears it out
        for sentence in long_sentences:
            await session.speak(sentence)
        await session.flush()
        await _until(session, AudioChunk)
        await asyncio.sleep(hold_s)
        await session.cancel()  # the caller barges in
        await _until(session, Cancelled)
        after = await short_answer(session)
    return {"fresh_s": round(fresh, 4), "after_cancel_s": round(after, 4)}


def summarize(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per side: median first audio fresh and after a cancel, and the median of the rounds' ratios."""
    out: dict[str, Any] = {}
    for side in SIDES:
        pairs = [r[side] for r in rounds]
        out[side] = {
            "fresh_ms_median": round(1000 * statistics.median(p["fresh_s"] for p in pairs), 1),
            "after_cancel_ms_median": round(1000 * statistics.median(p["after_cancel_s"] for p in pairs), 1),
            "ratio_median": round(statistics.median(p["after_cancel_s"] / p["fresh_s"] for p in pairs), 3),
        }
    return out


async def measure(urls: dict[str, str], rounds: int, hold_s: float) -> list[dict[str, dict[str, float]]]:
    long_sentences = [s for s in iter_sentences(answer_text(1)) if s.strip()]
    found = []
    for number in range(rounds):
        found.append({side: await one_round(url, long_sentences, hold_s) for side, url in urls.items()})
        print(f"round {number + 1}/{rounds}: "
              + ", ".join(f"{side} {r['fresh_s'] * 1000:.0f} -> {r['after_cancel_s'] * 1000:.0f} ms"
                          for side, r in found[-1].items()), file=sys.stderr)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.barge_in", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hold-s", type=float, default=0.3, help="how long after the long answer's first audio "
                        "the caller barges in")
    parser.add_argument("--out", type=Path, default=None, help="default: bench/results/barge_in-ENGINE.json")
    args = parser.parse_args(argv)
    began, load = time.perf_counter(), round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="barge-in-") as logs:
        servers = {side: ServerProcess(model_dir=args.model_dir, python=kokoro_python(), variants=variants,
                                       log_path=Path(logs) / f"{side}.log") for side, variants in SIDES.items()}
        try:
            pings = {side: server.start() for side, server in servers.items()}
            rounds = asyncio.run(measure({side: s.url for side, s in servers.items()}, args.rounds, args.hold_s))
        finally:
            for server in servers.values():
                server.stop()
    engine = pings["production"]["engine"]
    record = {
        "what": "first audio of a short answer sent right after a cancel of a long one, over a fresh one's, "
                "same session, same run; production against no_halt (a cancelled window runs to its end)",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "engine": engine, "model_dir": args.model_dir.name, "rounds": args.rounds, "hold_s": args.hold_s,
        "short": SHORT, "long_sentences": len([s for s in iter_sentences(answer_text(1)) if s.strip()]),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "loadavg_before": load},
        "decoder_pace": {side: ping.get("decoder_pace") for side, ping in pings.items()},
        "summary": summarize(rounds), "per_round": rounds, "wall_s": round(time.perf_counter() - began, 1),
    }
    out = args.out or Path("bench/results") / f"barge_in-{engine}.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
