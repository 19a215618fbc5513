"""`python -m bench.capacity`: how many concurrent sessions one engine serves within the budget.

For N on a ladder (1, 2, 4, ...), N WebSocket sessions start at once, each speaking the same few
sentences (pipelined ``speak`` messages, then ``flush``). The figures are the server's own metric
lines (kokoro_server/metrics.py), the very numbers the endpoint's first-audio alarm reads: p95 of
``first_audio_ms`` over every utterance of the rung, and the total ``stall_ms``. The capacity is the
largest N whose p95 is within ``--budget-ms`` and whose stall total is zero (``--stall-ms`` to
tolerate some); the ladder stops at the first rung that fails.

The result names what it measured (``--instance-type`` labels the machine: pass the SageMaker
instance type when running on one, ``bench/gpu.sh`` style; the default ``local`` is not one), so
``deploy-tts plan`` uses a figure only for the instance type it was measured on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

SENTENCES = (
    "Walls, mirrors and fish tanks all soak up the signal.",
    "Move the router somewhere high and central.",
    "Then restart it and check the speed again.",
)
TURN_TIMEOUT_S = 300.0


@dataclass(frozen=True, kw_only=True)
class Rung:
    sessions: int
    utterances: int
    first_audio_p95_ms: float
    stall_ms_total: int
    ok: bool


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile (what CloudWatch's p95 approximates for few samples)."""
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)])


def utterance_lines(log: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The utterance metric lines written to ``log`` after byte ``offset``, and the new offset."""
    data = log.read_bytes()
    found = []
    for raw in data[offset:].decode(errors="replace").splitlines():
        if raw.startswith("{"):
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and line.get("kokoro_metric") == "utterance":
                found.append(line)
    return found, len(data)


async def _session(ws_url: str, sentences: tuple[str, ...]) -> None:
    async with connect(ws_url, proxy=None, max_size=4 * 1024 * 1024, open_timeout=30, ping_interval=None) as ws:
        for index, text in enumerate(sentences):
            await ws.send(json.dumps({"type": "speak", "id": f"c{index}", "text": text}))
        await ws.send(json.dumps({"type": "flush"}))
        deadline = time.monotonic() + TURN_TIMEOUT_S
        while time.monotonic() < deadline:
            message = await asyncio.wait_for(ws.recv(), TURN_TIMEOUT_S)
            if isinstance(message, str):
                kind = json.loads(message).get("type")
                if kind == "turn_end":
                    break
                if kind == "error":
                    raise RuntimeError(f"the server refused a capacity session: {message}")
        await ws.send(json.dumps({"type": "close"}))


async def measure_rung(*, ws_url: str, log: Path, sessions: int, budget_ms: float, stall_ms: int,
                       sentences: tuple[str, ...] = SENTENCES) -> Rung:
    _, offset = utterance_lines(log, 0)
    await asyncio.gather(*(_session(ws_url, sentences) for _ in range(sessions)))
    expected = sessions * len(sentences)
    lines: list[dict[str, Any]] = []
    for _ in range(100):  # the last lines may trail the last turn_end by a moment (bounded)
        lines, _ = utterance_lines(log, offset)
        if len([ln for ln in lines if ln.get("route") == "ws"]) >= expected:
            break
        await asyncio.sleep(0.05)
    ws_lines = [ln for ln in lines if ln.get("route") == "ws"]
    if not ws_lines:
        raise RuntimeError("the server logged no utterance metric lines: is it a server with kokoro_server.metrics?")
    first = p95([float(ln["first_audio_ms"]) for ln in ws_lines])
    stall = sum(int(ln["stall_ms"]) for ln in ws_lines)
    return Rung(sessions=sessions, utterances=len(ws_lines), first_audio_p95_ms=first, stall_ms_total=stall,
                ok=first <= budget_ms and stall <= stall_ms)


async def ladder(*, ws_url: str, log: Path, rungs: list[int], budget_ms: float, stall_ms: int) -> list[Rung]:
    measured = []
    for sessions in rungs:
        rung = await measure_rung(ws_url=ws_url, log=log, sessions=sessions, budget_ms=budget_ms, stall_ms=stall_ms)
        measured.append(rung)
        print(f"{sessions:>3} sessions: p95 first audio {rung.first_audio_p95_ms:.0f} ms, "
              f"stall {rung.stall_ms_total} ms over {rung.utterances} utterances: {'ok' if rung.ok else 'over'}",
              file=sys.stderr)
        if not rung.ok:
            break
    return measured


def result(*, rungs: list[Rung], instance_type: str, budget_ms: float, stall_ms: int, model: str) -> dict[str, Any]:
    passing = [r.sessions for r in rungs if r.ok]
    return {
        "schema": 1,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine()},
        "model": model,
        "capacity": {"instance_type": instance_type, "sessions": max(passing, default=0),
                     "budget_ms": budget_ms, "stall_ms": stall_ms},
        "ladder": [asdict(r) for r in rungs],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.capacity", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True, help="the model the server loads")
    parser.add_argument("--kokoro-python", type=Path, default=Path(".venv-kokoro/bin/python"))
    parser.add_argument("--instance-type", default="local",
                        help="what this machine is (a SageMaker instance type when run on one)")
    parser.add_argument("--budget-ms", type=float, default=1000.0, help="p95 first-audio budget (firstAudioBudgetMs)")
    parser.add_argument("--stall-ms", type=int, default=0, help="total stall tolerated per rung")
    parser.add_argument("--ladder", default="1,2,4,8,16,32", help="session counts to try, in order")
    parser.add_argument("--out", type=Path, default=Path("bench/results/capacity.json"))
    args = parser.parse_args(argv)
    try:
        rungs = [int(n) for n in args.ladder.split(",")]
    except ValueError:
        parser.error(f"--ladder: expected comma-separated integers, got {args.ladder!r}")
    from .server import ServerProcess  # the harness's own server runner

    log_path = args.out.with_suffix(".log")
    server = ServerProcess(python=args.kokoro_python, model_dir=args.model_dir, log_path=log_path)
    server.start()
    try:
        ws_url = "ws" + server.url.removeprefix("http") + "/invocations-bidirectional-stream"
        measured = asyncio.run(ladder(ws_url=ws_url, log=log_path, rungs=rungs,
                                      budget_ms=args.budget_ms, stall_ms=args.stall_ms))
    finally:
        server.stop()
    report = result(rungs=measured, instance_type=args.instance_type, budget_ms=args.budget_ms,
                    stall_ms=args.stall_ms, model=str(args.model_dir))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["capacity"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
