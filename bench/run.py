"""``make bench``: one command that measures the streaming TTS stack end to end on this machine.

    python -m bench.run [--model-dir DIR] [--engine torch|onnx] [--quick] [--out bench/results]
                        [--repeats N] [--url http://127.0.0.1:PORT] [--budget-s S] [--no-design] [--no-relay]

It starts the Kokoro server from the Kokoro environment (``.venv-kokoro``, or $KOKORO_PYTHON) on a
free loopback port, replays a simulated agent answer (bench.scenario) against it in three ways
(batch, sentence streaming over HTTP, pipelined WebSocket), measures server overhead, a
concurrency ladder, the codecs and the sentence chunker, then what each design choice buys
(bench/design.py: windowed vs one-shot decoding, deadline vs round-robin scheduling), and writes ``latest.json``,
``latest.md``, ``timeline.png`` and ``concurrency.png`` to ``--out`` (replacing the previous
run) and prints a summary against the targets. See docs/benchmarks.md.

The model: ``--model-dir`` if given; else with ``--quick`` a tiny random-weight model built in a
temporary directory; else the packaged real Kokoro-82M weights (``models/kokoro-82m-onnx``, built
with ``kokoro_tools.packaged_weights`` when missing), falling back to a tiny model, loudly, when
they cannot be had. ``--url`` benchmarks a server that is already running instead (loopback).

The run is bounded: ``--budget-s`` (default 540 s, 50 s with --quick) is a soft limit that trims
the optional repeats (never below the minimums: one full run per mode, two TTFA samples per mode,
one round per ladder rung, one codec round), and every network wait has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from . import codec_quality, design, ladder, measure, report, sagemaker_relay
from .chunker_bench import measure as chunker_measure
from .codecs import codec_binary, codec_sse
from .models import ModelChoice, choose_model, classify_model_dir, kokoro_python
from .scenario import CODEC_TEXT, agent_answer
from .server import ServerProcess, ping, quiesce

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bench" / "results"
STARTED = time.perf_counter()
MODES = ("batch", "stream", "bidi")


@dataclass(frozen=True)
class Plan:
    """How much work one run does. ``repeats`` counts TTFA samples per mode, full runs included."""

    repeats: int = 5
    min_repeats: int = 2
    full_runs: int = 1
    paragraphs: int = 6
    probes: int = 10
    min_probes: int = 3
    ladder: tuple[int, ...] = (1, 2, 4, 8)
    ladder_paragraphs: int = 1
    ladder_first_sentence_only: bool = False
    ladder_samples: int = 2  # rounds per rung: ceil(ladder_samples / sessions)
    codec_rounds: int = 2
    chunker_repeats: int = 5
    chunker_kb: int = 256
    full_warmup: bool = True  # every path and encoder once before measuring
    codec_text: str = CODEC_TEXT
    budget_s: float = 540.0

    @classmethod
    def quick(cls) -> Plan:
        return cls(repeats=2, paragraphs=1, probes=2, min_probes=2, ladder_samples=1,
                   ladder_first_sentence_only=True, codec_rounds=1, chunker_repeats=1, chunker_kb=64,
                   full_warmup=False, codec_text="Okay, sure.", budget_s=50.0)


class Budget:
    """A soft deadline: optional repeats of a phase run only while the elapsed time is under
    ``fraction`` of the budget (the phases are given increasing fractions)."""

    def __init__(self, total_s: float) -> None:
        self.total_s = total_s
        self.began = time.perf_counter()
        self.trimmed: list[str] = []

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.began

    def allows(self, fraction: float, what: str) -> bool:
        if self.elapsed_s < self.total_s * fraction:
            return True
        self.trimmed.append(what)
        return False


# --------------------------------------------------------------------------------------------
# Which model


def loadavg() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def machine_info(engine: str | None) -> dict[str, Any]:
    cpu_model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "onnx_threads": None,
        "torch_threads": None,
    }
    if engine == "onnx":
        info["onnx_threads"] = int(os.environ.get("KOKORO_ONNX_THREADS") or os.cpu_count() or 1)
    return info


def start_torch_threads_probe(python: Path) -> subprocess.Popen[str] | None:
    """torch's intra-op thread count as the server's environment sees it (torch engine only)."""
    if not python.exists():
        return None
    return subprocess.Popen([str(python), "-c", "import torch; print(torch.get_num_threads())"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def finish_probe(proc: subprocess.Popen[str] | None) -> int | None:
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=120)
        return int(out.strip()) if proc.returncode == 0 and out.strip() else None
    except (subprocess.TimeoutExpired, ValueError):
        proc.kill()
        proc.wait()
        return None


# --------------------------------------------------------------------------------------------
# The measurement phases


def log(message: str) -> None:
    print(f"bench [{time.perf_counter() - STARTED:6.1f} s]: {message}", flush=True)


async def measure_all(target: measure.Target, plan: Plan, budget: Budget, *, relay: bool = True) -> dict[str, Any]:
    scenario = agent_answer().truncated(plan.paragraphs)
    ladder_scenario = (scenario.first_sentence_only() if plan.ladder_first_sentence_only
                       else scenario.truncated(plan.ladder_paragraphs))
    first_fragment = scenario.first_piece(early_first_fragment=True)
    raw: dict[str, Any] = {"scenario": scenario.summary(), "ladder_scenario": ladder_scenario.summary(),
                           "quiesce_timeouts": 0}
    timeout = httpx.Timeout(measure.RUN_TIMEOUT_S, connect=30.0)
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:

        async def settle() -> None:
            if not await quiesce(client, target.base_url):
                raw["quiesce_timeouts"] += 1

        raw["ping"] = await ping(client, target.base_url)

        # Warm-up: every path once (HTTP, WebSocket, each encoder), results thrown away.
        log("warming up")
        if plan.full_warmup:
            await codec_binary(client, target, scenario.first_piece(early_first_fragment=False), "pcm")
            await measure.probe_overhead(target, first_fragment, 1)
            for fmt in measure.CODECS:
                await codec_binary(client, target, "Okay.", fmt)
        else:  # --quick: a smoke run, not a measurement
            await codec_binary(client, target, "Okay.", "pcm")
        await settle()

        # Server overhead: TTFA over the WebSocket minus the engine's synthesis time; each probe
        # is paired with one asking for word timestamps (order alternating), to price them.
        log(f"server overhead ({plan.probes} probes of {first_fragment!r}, without and with timestamps)")
        probes: list[dict[str, float]] = []
        timed: list[dict[str, float]] = []
        for i in range(plan.probes):
            if i >= plan.min_probes and not budget.allows(0.15, f"overhead probe {i + 1}"):
                break
            for with_words in ((False, True) if i % 2 == 0 else (True, False)):
                found = await measure.probe_overhead(target, first_fragment, 1, timestamps=with_words)
                (timed if with_words else probes).extend(found)
        raw["overhead_probes"] = probes
        raw["timestamp_probes"] = timed
        await settle()

        if relay:
            log(f"SageMaker relay: {plan.probes} paired rounds through the stand-in")
            raw["sagemaker_relay"] = await sagemaker_relay.measure(target, first_fragment, rounds=plan.probes)
            await settle()

        # TTFA and total time: round 0.. are full runs, the rest stop at the first audio.
        traces: dict[str, list[measure.Trace]] = {m: [] for m in MODES}
        for r in range(plan.repeats):
            if r >= max(plan.min_repeats, plan.full_runs) and not budget.allows(0.55, f"ttfa round {r + 1}"):
                break
            full = r < plan.full_runs
            order = MODES[r % 3:] + MODES[: r % 3]  # rotate, so no mode always runs first
            for mode in order:
                trace = await measure.RUNNERS[mode](client, target, scenario, full)
                traces[mode].append(trace)
                log(f"round {r + 1}/{plan.repeats} {mode:6s} {'full' if full else 'ttfa'}: "
                    f"first audio {fmt_ms(trace.first_audio_s)}"
                    + (f", last audio {fmt_ms(trace.last_audio_s)}, {trace.audio_s:.1f} s audio" if full else ""))
                await settle()
        raw["traces"] = traces

        # Concurrency ladder.
        rungs: list[dict[str, Any]] = []
        for sessions in plan.ladder:
            rounds = max(1, math.ceil(plan.ladder_samples / sessions))
            merged: dict[str, Any] = {"sessions": sessions, "ttfa_ms": [], "audio_s": 0.0, "wall_s": 0.0,
                                      "rounds": 0, "overhead_ms": [], "round_rtf": []}
            for r in range(rounds):
                if r >= 1 and not budget.allows(0.85, f"ladder {sessions} round {r + 1}"):
                    break
                result = await ladder.ladder_rung(target, ladder_scenario, sessions)
                merged["ttfa_ms"] += result["ttfa_ms"]
                merged["overhead_ms"] += result["overhead_ms"]
                merged["audio_s"] += result["audio_s"]
                merged["wall_s"] += result["wall_s"]
                merged["round_rtf"].append(result["audio_s"] / result["wall_s"])
                merged["rounds"] += 1
                await settle()
            log(f"ladder {sessions} sessions: TTFA {measure.spread(merged['ttfa_ms'])}, "
                f"audio/wall {merged['audio_s'] / merged['wall_s']:.2f}")
            rungs.append(merged)
        raw["ladder"] = rungs

        # Codecs: binary first byte and size; SSE for audio_ms and the model's time.
        codec: dict[str, dict[str, list[dict[str, float]]]] = {f: {"binary": [], "sse": []} for f in measure.CODECS}
        for r in range(plan.codec_rounds):
            if r >= 1 and not budget.allows(0.95, f"codec round {r + 1}"):
                break
            for fmt in measure.CODECS:
                codec[fmt]["binary"].append(await codec_binary(client, target, plan.codec_text, fmt))
                codec[fmt]["sse"].append(await codec_sse(client, target, plan.codec_text, fmt))
            await settle()
        raw["codec_quality"] = await codec_quality.measure(client, target, plan.codec_text)
        log("codecs done")
        raw["codecs"] = codec
        raw["codec_text"] = plan.codec_text
    return raw


def fmt_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="model directory (default: see the module docstring)")
    parser.add_argument("--engine", choices=["torch", "onnx"], default=None,
                        help="KOKORO_ENGINE for the server (default: what the model directory holds)")
    parser.add_argument("--device", default=None, help="KOKORO_DEVICE for the server (cpu, cuda)")
    parser.add_argument("--quick", action="store_true", help="tiny settings: a smoke run, not a measurement")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (replaced)")
    parser.add_argument("--repeats", type=int, default=None, help="TTFA samples per mode (default 5, quick 2)")
    parser.add_argument("--budget-s", type=float, default=None, help="soft time limit (default 540, quick 50)")
    parser.add_argument("--no-design", action="store_true",
                        help="skip the design comparison (bench/design.py: three more servers)")
    parser.add_argument("--no-relay", action="store_true",
                        help="skip the SageMaker relay (the AWS SDKs and the stand-in: bench/gpu.sh on a lent GPU)")
    parser.add_argument("--url", default=None,
                        help="benchmark an already running server at this loopback URL instead of starting one")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.url and not args.url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]")):
        parser.error("--url must be a loopback http:// URL")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budget_start = time.perf_counter()
    load_start = loadavg()
    plan = Plan.quick() if args.quick else Plan()
    overrides: dict[str, Any] = {}
    if args.repeats is not None:
        overrides["repeats"] = args.repeats
        overrides["min_repeats"] = min(plan.min_repeats, args.repeats)
        overrides["full_runs"] = min(plan.full_runs, args.repeats)
    if args.budget_s is not None:
        overrides["budget_s"] = args.budget_s
    if overrides:
        plan = Plan(**{**asdict(plan), **overrides})
    out = Path(args.out)
    python = kokoro_python()
    server: ServerProcess | None = None
    choice: ModelChoice | None = None
    threads_probe = None
    failed = True
    timestamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    try:
        if args.url:
            kind, real = classify_model_dir(Path(args.model_dir)) if args.model_dir else ("unknown (--url)", False)
            choice = ModelChoice(dir=Path(args.model_dir or "?"), kind=kind, real_weights=real,
                                 note=f"--url {args.url} (server started elsewhere)")
            target = measure.Target(args.url.rstrip("/"))
            start_s = None
        else:
            if not python.exists():
                print(f"bench: the Kokoro environment is missing ({python}); run `make install`", file=sys.stderr)
                return 2
            choice = choose_model(model_dir=args.model_dir, quick=args.quick, python=python)
            env: dict[str, str] = {}
            if args.engine:
                env["KOKORO_ENGINE"] = args.engine
            if args.device:
                env["KOKORO_DEVICE"] = args.device
            if (args.engine or "") == "torch" or not (choice.dir / "manifest.json").exists():
                threads_probe = start_torch_threads_probe(python)
            out.mkdir(parents=True, exist_ok=True)
            log_path = Path(tempfile.gettempdir()) / f"bench-kokoro-{os.getpid()}.log"
            server = ServerProcess(python=python, model_dir=choice.dir, log_path=log_path, env=env)
            log(f"starting the Kokoro server on {choice.dir} ({choice.kind})")
            server.start()
            start_s = server.started_s
            log(f"server ready in {start_s:.1f} s")
            target = measure.Target(server.url)
        budget = Budget(plan.budget_s)
        budget.began = budget_start
        raw = asyncio.run(measure_all(target, plan, budget, relay=not args.no_relay))
        if server is not None and choice is not None and not args.no_design:
            server.stop()  # one server at a time: the design phase starts its own
            raw["design"] = design.run(
                python=python, model_dir=choice.dir, env=env, log=log, log_dir=Path(tempfile.gettempdir()),
                plan=design.DesignPlan.quick() if args.quick else design.DesignPlan(),
            )
        failed = False
    except measure.BenchError as exc:
        print(f"bench: FAILED: {exc}", file=sys.stderr)
        if server is not None:
            print(f"server log ({server.log_path}):\n{server.log_tail()}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
            if failed is False and server.log_path is not None:
                server.log_path.unlink(missing_ok=True)  # kept (and its tail printed) on failure
        if choice is not None and choice.temporary:
            shutil.rmtree(choice.dir.parent, ignore_errors=True)

    log(f"chunker throughput ({plan.chunker_repeats} x {plan.chunker_kb} KiB)")
    raw["chunker"] = chunker_measure(repeats=plan.chunker_repeats, size_kb=plan.chunker_kb)
    engine = raw["ping"].get("engine")
    machine = machine_info(engine)
    machine["torch_threads"] = finish_probe(threads_probe)
    machine["loadavg_1m_start"] = load_start
    machine["loadavg_1m_end"] = loadavg()
    meta = {
        "timestamp": timestamp,
        "engine": engine,
        "device": raw["ping"].get("device"),
        "model": choice.describe(),
        "machine": machine,
        "plan": asdict(plan),
        "quick": args.quick,
        "server_start_s": None if start_s is None else round(start_s, 2),
        "budget_trimmed": budget.trimmed,
        "wall_s": round(time.perf_counter() - budget_start, 1),
    }
    results = report.build(raw, meta)
    results["codec_quality"] = raw["codec_quality"]
    if "design" in raw:
        results["design"] = raw["design"]
        results["targets"] += design.targets(raw["design"])
    paths = report.write(results, raw, out)
    if "design" in raw:
        (out / "latest.md").write_text((out / "latest.md").read_text() + design.markdown(raw["design"]))
    print(report.summary_text(results))
    print("bench: wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
