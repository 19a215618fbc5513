"""What each design choice buys: servers started with one choice changed at a time, same run.

Part of ``make bench`` (``bench.run`` calls :func:`run` after its main phases; ``--no-design``
skips it). Three servers on the same model, at most two up at once (an idle one costs no model time):

* ``windowed`` (the default: windowed decoding, deadline-first scheduling),
* ``one_shot``, ``round_robin`` (comparison variants injected by the bench: bench/variants.py;
  round_robin with the decoder pace the windowed server measured, so both cut windows alike).

Measured:

* factorial: time to first audio on the agent scenario for cutter (whole sentence / early first
  fragment) x transport (a POST per sentence / one pipelined WebSocket) x decoding (one-shot /
  windowed), so each effect shows on its own;
* time to first audio of a 6-word and a 35-word sentence spoken alone (windowed should make them
  close: target ratio <= 1.5);
* load arriving over time: N sessions (1, 2, 4, 8) start the agent answer at seeded random times
  within ``arrival_spread_s``, in ``arrival_patterns`` start patterns (pooled: at 4 sessions one
  pattern's stall ranged 0-690 ms per audio minute over four patterns); each listener plays its
  audio in real time from its first byte. p95 time to first audio and stall (ms of silence after
  playback began, per minute of audio), round-robin vs deadline. Targets: no stall at 2 sessions;
  deadline stall <= half round-robin's at 4 and 8. A stall also counts the agent not having written
  the next sentence yet; both schedulers see the same text at the same times, so the comparison holds;
* throughput: a paragraph of eight sentences as one message, ours vs a one-shot loop (kokoro's
  KPipeline on a torch model), in one process (bench/throughput.py).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from . import measure
from .report import _target
from .scenario import Scenario, agent_answer
from .server import ServerProcess

SHORT = "Start with where the router sits."  # 6 words
LONG = ("Routers work best in the open, up high and near the middle of your home, because walls, "
        "mirrors and fish tanks all soak up the signal before it reaches the rooms that need it.")  # 35 words
SERVERS: dict[str, tuple[str, ...]] = {  # each server's comparison variants (bench/variants.py)
    "windowed": (),
    "one_shot": ("one_shot",),
    "round_robin": ("round_robin",),
}
ARRIVAL_SEED = 16


@dataclass(frozen=True)
class DesignPlan:
    factorial_repeats: int = 2
    probe_repeats: int = 3
    load_sessions: tuple[int, ...] = (1, 2, 4, 8)
    arrival_spread_s: float = 6.0
    arrival_patterns: int = 3  # start patterns per rung of 2 or more sessions, pooled
    paragraphs: int = 6
    load_paragraphs: int = 2
    throughput_sentences: int = 8

    @classmethod
    def quick(cls) -> DesignPlan:
        return cls(factorial_repeats=1, probe_repeats=1, load_sessions=(1, 2), arrival_spread_s=1.0, arrival_patterns=1,
                   paragraphs=1, load_paragraphs=1, throughput_sentences=2)


def playback_stall_s(audio: list[tuple[float, int]]) -> float:
    """Silence a real-time player hears after its first byte: each chunk of pcm plays after the
    previous ones; a chunk that arrives after the player ran dry stalls it by the gap."""
    played_until: float | None = None
    stall = 0.0
    for t, size in sorted(audio):
        seconds = size / measure.PCM_BYTES_PER_S
        if played_until is None:
            played_until = t + seconds
            continue
        if t > played_until:
            stall += t - played_until
            played_until = t
        played_until += seconds
    return stall


def plays_at_s(audio: list[tuple[float, int]], offset: int) -> float:
    """When the player of :func:`playback_stall_s` (real time from the first byte, stalling when it
    runs dry) plays byte ``offset`` of the stream; ``audio``: each chunk's arrival and size, in order."""
    played_until: float | None = None
    start = 0
    for t, size in audio:
        played_until = t if played_until is None else max(played_until, t)
        if offset < start + size:
            return played_until + (offset - start) / measure.PCM_BYTES_PER_S
        played_until += size / measure.PCM_BYTES_PER_S
        start += size
    raise ValueError(f"offset {offset} is past the stream's {start} bytes")


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


async def factorial(target: measure.Target, scenario: Scenario, repeats: int) -> dict[str, float | None]:
    """Median TTFA (ms) per cutter x transport on one server."""
    out: dict[str, float | None] = {}
    timeout = httpx.Timeout(measure.RUN_TIMEOUT_S, connect=30.0)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
        for cutter, early in (("sentence", False), ("fragment", True)):
            for transport in ("stream", "bidi"):
                samples = []
                for _ in range(repeats):
                    if transport == "stream":
                        trace = await measure.run_stream(client, target, scenario, full=False,
                                                         early_first_fragment=early)
                    else:
                        trace = await measure.run_bidi(target, scenario, full=False, early_first_fragment=early)
                    if trace.first_audio_s is not None:
                        samples.append(trace.first_audio_s * 1000)
                    await asyncio.sleep(0.5)
                out[f"{cutter}/{transport}"] = _median(samples)
    return out


async def sentence_ttfa(target: measure.Target, repeats: int) -> dict[str, Any]:
    short = [p["ttfa_ms"] for p in await measure.probe_overhead(target, SHORT, repeats)]
    long = [p["ttfa_ms"] for p in await measure.probe_overhead(target, LONG, repeats)]
    s, l_ = _median(short), _median(long)
    return {"short_ms": s, "long_ms": l_, "short_words": len(SHORT.split()), "long_words": len(LONG.split()),
            "ratio": None if not s or l_ is None else round(l_ / s, 2)}


async def arrival_load(
    target: measure.Target, scenario: Scenario, sessions: int, spread_s: float, patterns: int = 1, *,
    first_pattern: int = 0,
) -> dict[str, Any]:
    """``sessions`` agents starting at seeded random times, ``patterns`` different start patterns
    one after another (one pattern decides little: four sessions landing within a second stall
    where four spread over six seconds do not); TTFA p95 and stall pooled over them all.
    ``first_pattern``: the first pattern's number (bench.paired runs them one at a time)."""
    ttfa: list[float] = []
    stall_by_pattern: list[float | None] = []
    stall = audio_s = 0.0
    for pattern in range(first_pattern, first_pattern + (patterns if sessions > 1 else 1)):
        rng = random.Random(ARRIVAL_SEED + sessions + 1000 * pattern)
        starts = sorted(rng.uniform(0.0, spread_s) for _ in range(sessions))
        sockets = [await measure.open_ws(target) for _ in range(sessions)]
        try:
            base = measure.now() + 0.2
            traces = await asyncio.wait_for(asyncio.gather(*(
                measure.bidi_session(ws, scenario, base + start, full=True, mode=f"arrival{sessions}")
                for ws, start in zip(sockets, starts)
            )), measure.RUN_TIMEOUT_S)
        finally:
            await asyncio.gather(*(measure.close_ws(ws) for ws in sockets), return_exceptions=True)
        ttfa += [t.first_audio_s * 1000 for t in traces if t.first_audio_s is not None]
        pattern_stall = sum(playback_stall_s(t.audio) for t in traces)
        pattern_audio = sum(t.audio_s for t in traces)
        stall_by_pattern.append(_r(pattern_stall * 60_000 / pattern_audio) if pattern_audio else None)
        stall, audio_s = stall + pattern_stall, audio_s + pattern_audio
    return {"sessions": sessions, "ttfa_p95_ms": _r(p95(ttfa)),
            "stall_ms_per_audio_min": _r(stall * 60_000 / audio_s) if audio_s else None, "audio_s": _r(audio_s),
            "stall_by_pattern": stall_by_pattern}


def run(
    *, python: Path, model_dir: Path, env: dict[str, str], plan: DesignPlan, log: Callable[[str], None],
    log_dir: Path,
) -> dict[str, Any]:
    """Start each server in turn and measure; returns the ``design`` section of latest.json."""
    scenario = agent_answer().truncated(plan.paragraphs)
    load_scenario = agent_answer().truncated(plan.load_paragraphs)
    result: dict[str, Any] = {"factorial_ttfa_ms": {}, "sentence_ttfa": {}, "arrival_load": {},
                              "arrival_spread_s": plan.arrival_spread_s, "load_paragraphs": plan.load_paragraphs,
                              "arrival_patterns": plan.arrival_patterns}
    servers: dict[str, ServerProcess] = {}

    def start(name: str, extra: dict[str, str]) -> tuple[measure.Target, dict[str, Any]]:
        server = servers[name] = ServerProcess(python=python, model_dir=model_dir, env={**env, **extra},
                                               variants=SERVERS[name], log_path=log_dir / f"bench-design-{name}.log")
        log(f"design: starting the {name} server")
        status = server.start()  # picks the port: the URL exists only after this
        return measure.Target(server.url), status

    try:
        windowed, status = start("windowed", {})
        # The schedulers are compared at the same window cuts: a pace measured per server start
        # varied 0.17-0.28 here, and each pace cuts an answer's first sentence differently.
        result["decoder_pace"] = pace = status.get("decoder_pace")
        pinned = {} if pace is None else {"KOKORO_DECODER_PACE": str(pace)}
        one_shot, _ = start("one_shot", {})
        for name, target in (("windowed", windowed), ("one_shot", one_shot)):
            result["factorial_ttfa_ms"][name] = asyncio.run(factorial(target, scenario, plan.factorial_repeats))
            log(f"design: {name} factorial {result['factorial_ttfa_ms'][name]}")
            result["sentence_ttfa"][name] = asyncio.run(sentence_ttfa(target, plan.probe_repeats))
            log(f"design: {name} 6 vs 35 words {result['sentence_ttfa'][name]}")
        servers.pop("one_shot").stop()
        round_robin, _ = start("round_robin", pinned)
        # Both servers stay up (an idle one costs no model time) and take turns rung by rung, in
        # alternating order, so a host that slows down mid-run does not favour either policy.
        policies = [("deadline", windowed), ("round_robin", round_robin)]
        for rung, n in enumerate(plan.load_sessions):
            for policy, target in policies if rung % 2 == 0 else policies[::-1]:
                found = asyncio.run(arrival_load(target, load_scenario, n, plan.arrival_spread_s,
                                                 plan.arrival_patterns))
                result["arrival_load"].setdefault(policy, []).append(found)
                log(f"design: {policy} arrivals {found}")
    finally:
        for server in servers.values():
            server.stop()
    log(f"design: throughput, {plan.throughput_sentences} sentences as one message (bench/throughput.py)")
    result["throughput"] = throughput(python, model_dir, plan.throughput_sentences, env)
    log(f"design: throughput {result['throughput']}")
    return result


def throughput(python: Path, model_dir: Path, sentences: int, env: dict[str, str]) -> dict[str, Any] | None:
    """bench/throughput.py in the Kokoro environment (it needs the engine in-process)."""
    import json
    import os
    import subprocess

    proc = subprocess.run(
        [str(python), "-m", "bench.throughput", "--model-dir", str(model_dir), "--sentences", str(sentences)],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=900,
        env={**os.environ, **env}, check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise measure.BenchError(f"bench.throughput failed ({proc.returncode}): {proc.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def targets(design: dict[str, Any]) -> list[dict[str, Any]]:
    """The design targets, judged on what this run measured."""
    out = []
    speed = (design.get("throughput") or {}).get("ours_windowed_over_baseline")
    out.append(_target("paragraph as one message: ours / one-shot loop (time)", "<= 1.0", speed,
                       speed is not None and speed <= 1.0))
    ratio = design["sentence_ttfa"].get("windowed", {}).get("ratio")
    out.append(_target("TTFA 35-word / 6-word sentence (windowed)", "<= 1.5", ratio,
                       ratio is not None and ratio <= 1.5))
    by_n = {p: {r["sessions"]: r for r in rows} for p, rows in design["arrival_load"].items()}
    two = by_n.get("deadline", {}).get(2)
    if two is not None:
        stall = two["stall_ms_per_audio_min"]
        out.append(_target("stall at 2 arriving sessions, ms per audio minute (deadline)", "0", stall, stall == 0))
    for n in (4, 8):
        d, r = by_n.get("deadline", {}).get(n), by_n.get("round_robin", {}).get(n)
        if d is None or r is None or d["stall_ms_per_audio_min"] is None or r["stall_ms_per_audio_min"] is None:
            continue
        value = d["stall_ms_per_audio_min"] / r["stall_ms_per_audio_min"] if r["stall_ms_per_audio_min"] else None
        met = d["stall_ms_per_audio_min"] <= 0.5 * r["stall_ms_per_audio_min"]
        out.append(_target(f"stall at {n} arriving sessions, deadline / round-robin", "<= 0.5x", value, met))
    return out


def markdown(design: dict[str, Any]) -> str:
    lines = ["", "## What each design choice buys (time to first audio, ms, median)", "",
             "| decoding | cutter | per-sentence POST | pipelined WebSocket |", "|---|---|---|---|"]
    for decoding, cells in design["factorial_ttfa_ms"].items():
        for cutter in ("sentence", "fragment"):
            lines.append(f"| {decoding} | {cutter} | {cells.get(cutter + '/stream')} | {cells.get(cutter + '/bidi')} |")
    lines += ["", "| decoding | 6-word TTFA ms | 35-word TTFA ms | ratio |", "|---|---|---|---|"]
    for decoding, row in design["sentence_ttfa"].items():
        lines.append(f"| {decoding} | {row['short_ms']} | {row['long_ms']} | {row['ratio']} |")
    t = design.get("throughput")
    if t:
        base = "kpipeline" if "kpipeline" in t else "loop"
        lines += ["", f"Throughput, {t['sentences']} sentences as one message: ours (windowed) "
                  f"{t['ours_windowed']['s']} s, ours (one-shot) {t['ours_one_shot']['s']} s, "
                  f"{base} {t[base]['s']} s."]
    patterns = design.get("arrival_patterns", 1)
    pace = design.get("decoder_pace")
    pinned = f"; both servers cut windows at decoder pace {pace:.3f}" if pace else ""
    lines += ["", f"Sessions arriving at random within {design['arrival_spread_s']} s ({patterns} start patterns "
              f"per rung of 2 or more, pooled; the two schedulers take turns rung by rung{pinned}):", "",
              "| scheduler | sessions | p95 TTFA ms | stall ms per audio minute | per pattern |",
              "|---|---|---|---|---|"]
    for policy, rows in design["arrival_load"].items():
        for r in rows:
            per = ", ".join(str(v) for v in r.get("stall_by_pattern", []))
            lines.append(f"| {policy} | {r['sessions']} | {r['ttfa_p95_ms']} | {r['stall_ms_per_audio_min']} | {per} |")
    return "\n".join(lines) + "\n"


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return _r(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
