"""Paired arrival runs: server variants up at once, each start pattern run on every one in turn.

``make bench`` compares the two schedulers once, rung by rung. Judging a change to the scheduler
or the windows needs more: this host's decoder pace moved from 0.17 to 0.35 within hours, and one
start pattern decides much (docs/models.md). Here every variant is up at once (an idle server
costs no model time), all cut windows at the pace the first one measured, and each start pattern
runs on every variant before the next pattern, the order rotating, so a host that slows down
mid-run slows them alike.

A variant is a name and settings: environment settings such as a grace (``KOKORO_FIRST_AUDIO_S``),
comparison variants the bench injects (``variants=round_robin``, several joined by ``+``:
bench/variants.py), or other code (``PYTHONPATH`` pointing at a git worktree's
``containers/kokoro``, e.g. one at an older commit, or with a patch applied)::

    .venv/bin/python -m bench.paired deadline round_robin:variants=round_robin \\
        --sessions 2,4,8 --patterns 0,1,2 --out bench/results/overload/round_robin.json

Patterns are bench.design's (pattern 0 is the first of ``make bench``'s three per rung).

``--measure sentence_ttfa`` times bench.design's 6-word and 35-word sentences spoken alone instead
(one of each per variant per round, ``--rounds`` rounds in rotating order), and the ratio of the
two within each round: how a change to the job sizing moves a long sentence's first audio::

    .venv/bin/python -m bench.paired sizer planner:PYTHONPATH=/tmp/before/containers/kokoro \\
        --measure sentence_ttfa --rounds 5 --out bench/results/sentence_ttfa.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import measure
from .design import DesignPlan, arrival_load, sentence_ttfa
from .scenario import agent_answer
from .server import ServerProcess

REPO = Path(__file__).resolve().parents[1]


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``name`` or ``name:KEY=VALUE,KEY=VALUE`` as (name, settings)."""
    name, _, settings = text.partition(":")
    if not name.isidentifier():
        raise ValueError(f"variant: expected NAME[:KEY=VALUE,...], got {text!r}")
    env: dict[str, str] = {}
    for item in filter(None, settings.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"variant {name}: expected KEY=VALUE, got {item!r}")
        env[key] = value
    return name, env


def turns(names: list[str], pattern_index: int) -> list[str]:
    """The order the variants take one pattern in: rotated by one per pattern, reversed every
    other one, so no variant always goes first or always follows the same one."""
    shift = pattern_index % len(names)
    order = names[shift:] + names[:shift]
    return order[::-1] if pattern_index % 2 else order


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant and session count: stall pooled over the patterns (ms per audio minute), and
    each pattern's stall and p95 first audio."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["variant"], run["sessions"]), []).append(run)
    out = []
    for (variant, sessions), found in groups.items():
        audio_s = sum(r["audio_s"] for r in found)
        stall_s = sum((r["stall_ms_per_audio_min"] or 0.0) * r["audio_s"] / 60_000 for r in found)
        out.append({
            "variant": variant, "sessions": sessions, "patterns": [r["pattern"] for r in found],
            "stall_ms_per_audio_min": round(stall_s * 60_000 / audio_s, 1) if audio_s else None,
            "stall_by_pattern": [r["stall_ms_per_audio_min"] for r in found],
            "ttfa_p95_ms_by_pattern": [r["ttfa_p95_ms"] for r in found],
        })
    return out


def summarize_sentences(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant: median first audio of each sentence and the median of the rounds' own ratios
    (a round's two sentences ran seconds apart, so a host that slows between rounds moves both)."""
    out = []
    for variant in dict.fromkeys(r["variant"] for r in runs):
        found = [r for r in runs if r["variant"] == variant]
        ratios = [r["ratio"] for r in found if r["ratio"] is not None]
        out.append({
            "variant": variant, "rounds": len(found),
            **{key: _median([r[key] for r in found if r[key] is not None]) for key in ("short_ms", "long_ms")},
            "ratio": round(statistics.median(ratios), 3) if ratios else None, "ratio_by_round": ratios,
        })
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def start_servers(
    variants: dict[str, dict[str, str]], servers: dict[str, ServerProcess], *, model_dir: Path, python: Path,
    log_dir: Path, log: Callable[[str], None],
) -> float | None:
    """Every variant up, into ``servers``, the later ones at the decoder pace the first measured (so
    all cut alike); that pace. The caller stops ``servers``, also when a later one fails to start."""
    pace: float | None = None
    for name, settings in variants.items():
        pinned = {} if pace is None else {"KOKORO_DECODER_PACE": str(pace)}
        env = dict(settings)
        injected = tuple(filter(None, env.pop("variants", "").split("+")))
        servers[name] = ServerProcess(python=python, model_dir=model_dir, log_path=log_dir / f"paired-{name}.log",
                                      env={**os.environ, **env, **pinned}, variants=injected)
        status = servers[name].start()
        pace = pace if pace is not None else status.get("decoder_pace")
        log(f"{name} up (decoder pace {pace})")
    return pace


def run_sentences(
    variants: dict[str, dict[str, str]], *, rounds: int, model_dir: Path, python: Path, log_dir: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    servers: dict[str, ServerProcess] = {}
    runs: list[dict[str, Any]] = []
    pace: float | None = None
    try:
        pace = start_servers(variants, servers, model_dir=model_dir, python=python, log_dir=log_dir, log=log)
        for index in range(rounds):
            for name in turns(list(variants), index):
                found = asyncio.run(sentence_ttfa(measure.Target(servers[name].url), 1))
                runs.append({"variant": name, "round": index, **found})
                log(f"{name} round {index}: 6 words {found['short_ms']} ms, 35 words {found['long_ms']} ms, "
                    f"ratio {found['ratio']}")
    finally:
        for server in servers.values():
            server.stop()
    return {"measure": "sentence_ttfa", "decoder_pace": pace, "variants": variants, "rounds": rounds,
            "summary": summarize_sentences(runs), "runs": runs}


def run(
    variants: dict[str, dict[str, str]], *, sessions: list[int], patterns: list[int], model_dir: Path,
    python: Path, log_dir: Path, log: Callable[[str], None],
) -> dict[str, Any]:
    plan = DesignPlan()
    scenario = agent_answer().truncated(plan.load_paragraphs)
    servers: dict[str, ServerProcess] = {}
    pace: float | None = None
    runs: list[dict[str, Any]] = []
    try:
        pace = start_servers(variants, servers, model_dir=model_dir, python=python, log_dir=log_dir, log=log)
        for index, pattern in enumerate(patterns):
            for n in sessions:
                for name in turns(list(variants), index):
                    found = asyncio.run(arrival_load(measure.Target(servers[name].url), scenario, n,
                                                     plan.arrival_spread_s, first_pattern=pattern))
                    runs.append({"variant": name, "pattern": pattern, **found})
                    log(f"{name} {n} sessions, pattern {pattern}: "
                        f"{found['stall_ms_per_audio_min']} ms per audio minute, "
                        f"p95 first audio {found['ttfa_p95_ms']} ms")
    finally:
        for server in servers.values():
            server.stop()
    return {"decoder_pace": pace, "variants": variants, "sessions": sessions, "patterns": patterns,
            "arrival_spread_s": plan.arrival_spread_s, "load_paragraphs": plan.load_paragraphs,
            "summary": summarize(runs), "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.paired", description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="+", help="NAME or NAME:KEY=VALUE,... (environment settings)")
    parser.add_argument("--sessions", default="2,4,8", help="session counts, comma-separated")
    parser.add_argument("--patterns", default="0,1,2", help="start patterns (bench.design's), comma-separated")
    parser.add_argument("--measure", choices=["arrivals", "sentence_ttfa"], default="arrivals",
                        help="arrival load (default), or a 6-word and a 35-word sentence spoken alone")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --measure sentence_ttfa")
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "kokoro-82m-onnx")
    parser.add_argument("--python", type=Path,
                        default=Path(os.environ.get("KOKORO_PYTHON", REPO / ".venv-kokoro/bin/python")))
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    try:
        variants = dict(parse_variant(text) for text in args.variants)
        sessions = [int(n) for n in args.sessions.split(",")]
        patterns = [int(p) for p in args.patterns.split(",")]
    except ValueError as error:
        parser.error(str(error))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.measure == "sentence_ttfa":
        result = run_sentences(variants, rounds=args.rounds, model_dir=args.model_dir, python=args.python,
                               log_dir=args.out.parent, log=log)
    else:
        result = run(variants, sessions=sessions, patterns=patterns, model_dir=args.model_dir, python=args.python,
                     log_dir=args.out.parent, log=log)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
