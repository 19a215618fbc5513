"""Turns of a conversation on a server that hands freed memory back 1 s after work, and on one at
the default (KOKORO_MEMORY_TRIM_AFTER_S, 30 s).

    .venv/bin/python -m bench.memory_trim --out bench/results/memory_trim.json

A caller speaks between two answers, so a voice agent's server is idle for seconds between them.
Both servers are up at once on the same model (an idle one costs no model time); each round
speaks bench.design's 6-word and 35-word sentences on each through the OpenAI speech route
(bench.side_by_side's client), the order rotating, and waits ``TURN_GAP_S`` after every answer:
longer than the 1 s server waits before it trims, so every answer of its own comes after a trim,
as a conversation's did before the default moved. Per answer: first byte, last byte, and the
server process's CPU seconds and page faults (/proc) over the request, and its resident memory
when the answer was asked for (what it held through the caller's turn); each ratio, default / 1 s,
is the median of the rounds' own ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from .design import LONG, SHORT
from .server import ServerProcess
from .side_by_side import add_run_options, cpu_seconds, page_faults, speak
from .soak import rss_kib

REPO = Path(__file__).resolve().parents[1]
TURN_GAP_S = 1.5
"""Silence after each answer: past the 1 s server's trim, as a caller's turn is."""
VARIANTS = {"trim_1s": {"KOKORO_MEMORY_TRIM_AFTER_S": "1"}, "default": {}}
CASES = {"short": SHORT, "long": LONG}
KEYS = ("first_s", "total_s", "cpu_s", "faults", "rss_mib")


async def measure(urls: dict[str, str], pids: dict[str, int], voice: str,
                  rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Every case on every variant once per round, the order rotating."""
    runs: dict[str, list[dict[str, Any]]] = {f"{variant}_{case}": [] for case in CASES for variant in urls}
    order = [(case, variant) for case in CASES for variant in urls]
    async with httpx.AsyncClient() as client:
        for variant in urls:
            await speak(client, urls[variant], "Warm up.", voice)
        for index in range(rounds):
            shift = index % len(order)
            for case, variant in order[shift:] + order[:shift]:
                await asyncio.sleep(TURN_GAP_S)
                pid = pids[variant]
                cpu, faults, rss = cpu_seconds(pid), page_faults(pid), round(rss_kib(pid) / 1024, 1)
                found = await speak(client, urls[variant], CASES[case], voice)
                found.update(cpu_s=round(cpu_seconds(pid) - cpu, 3), faults=page_faults(pid) - faults, rss_mib=rss)
                runs[f"{variant}_{case}"].append({key: found[key] for key in KEYS})
                print(f"round {index + 1}/{rounds} {variant} {case}: {json.dumps(runs[f'{variant}_{case}'][-1])}",
                      file=sys.stderr, flush=True)
    return runs


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per variant and case, and each ratio default / trim_1s as the median of the rounds'
    own ratios (a ratio of page faults is left out: the default's may be 0)."""
    rows = {case: {variant: {key: round(statistics.median(float(r[key]) for r in runs[f"{variant}_{case}"]), 4)
                             for key in KEYS} for variant in VARIANTS} for case in CASES}
    ratios: dict[str, float] = {}
    for case in CASES:
        pairs = list(zip(runs[f"default_{case}"], runs[f"trim_1s_{case}"], strict=False))
        for key in ("first_s", "total_s", "cpu_s"):
            ratios[f"{case}_{key}"] = round(statistics.median(float(d[key]) / float(t[key]) for d, t in pairs), 3)
    return {"rows": rows, "ratios": ratios, "rounds": min(len(found) for found in runs.values())}


def table(record: dict[str, Any]) -> list[str]:
    """docs/throughput.md's table: each case's medians on both servers, and the ratios."""
    lines = ["| answer | trim after 1 s: first byte / total / CPU s, page faults, MiB resident before | default "
             "(30 s): the same | first byte ratio | total ratio | CPU ratio |", "|---|---|---|---|---|---|"]
    for case, label in (("short", "6 words"), ("long", "35 words")):
        cells = [" / ".join(f"{row[key]:.3f}" for key in ("first_s", "total_s", "cpu_s"))
                 + f", {row['faults']:.0f}, {row['rss_mib']:.0f}"
                 for row in (record["rows"][case]["trim_1s"], record["rows"][case]["default"])]
        ratios = [f"{record['ratios'][f'{case}_{key}']:.3f}" for key in ("first_s", "total_s", "cpu_s")]
        lines.append(f"| {label} | " + " | ".join(cells + ratios) + " |")
    return lines + ["", f"`bench/results/memory_trim.json` ({record['when']}): `{record['command']}`; model "
                    f"`{record['model_dir']}`, voice `{record['voice']}`, {record['rounds']} rounds, "
                    f"{record['turn_gap_s']} s between answers, ratios default / trim after 1 s as the median of "
                    f"the rounds' own ratios, {record['cpus']} CPUs, {record['seconds']} s."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_trim", description=__doc__.splitlines()[0])
    add_run_options(parser, rounds=10)
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    servers = {variant: ServerProcess(python=args.python, model_dir=args.model_dir, env=env,
                                      log_path=args.out.with_suffix(f".{variant}.log"))
               for variant, env in VARIANTS.items()}
    began = time.monotonic()
    try:
        for server in servers.values():
            server.start()
        runs = asyncio.run(measure({v: s.url for v, s in servers.items()},
                                   {v: s.pid for v, s in servers.items()}, args.voice, args.rounds))
    finally:
        for server in servers.values():
            server.stop()
    record = {
        "what": "conversation turns, the idle memory trim 1 s after work against the default; ratios default / 1 s",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m bench.memory_trim " + " ".join(argv if argv is not None else sys.argv[1:]),
        "model_dir": args.model_dir.name, "voice": args.voice, "cpus": os.cpu_count(), "turn_gap_s": TURN_GAP_S,
        "seconds": round(time.monotonic() - began, 1), **summarize(runs), "runs": runs,
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print("\n".join(table(record)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
