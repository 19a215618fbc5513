"""Two lanes on the server's path: whether two model jobs at once, one core each, would serve
several listeners faster than the server's one job at a time on every core (the int8 onnx model).

    .venv-kokoro/bin/python -m bench.lanes_speech --out bench/results/lanes_speech.json

bench/onnx_lanes.py times two bare calls of the whole graph: at once on one-thread sessions they
took 0.83x the wall time of the same two one after the other on both cores. This bench asks the
same of the path a request takes (bench/engine_sides.py's ``ours``: Speech, G2P in its thread,
the deadline scheduler, the job sizer, windowed decoding), as that path would run with lanes:

* ``serial``: the server's way: one worker, the engine's session on ``os.cpu_count()`` threads;
* ``lanes``: two workers, the engine's session on one thread (``KOKORO_ONNX_THREADS=1``) and its
  lock lifted, so two jobs run at once.

Each side fits its own decoder cost to four paragraphs at once first, as a server that has served
a while (engine_sides.Sides), and the job sizer, which knows of one decoder, prices a lane's
slower calls as they are. Per round, rotating: four paragraphs at once and one paragraph alone on
each side. Reported: the medians of wall time, CPU, frames decoded per frame heard, decoder calls
and first audio (the first caller's, and the last of the four's), and each over ``serial``'s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from .engine_sides import CONCURRENT, Sides
from .onnx_lanes import REPO

if TYPE_CHECKING:
    from kokoro_server.engines.onnx_engine import OnnxEngine

FIGURES = ("total_s", "cpu_s", "decoded_per_heard", "decoder_calls", "first_s", "last_first_s")


def lane_engine(model_dir: Path) -> OnnxEngine:
    """The onnx engine on one intra-op thread, its runs no longer serialized: each job's calls run on
    the worker thread that makes them (onnxruntime's sessions take concurrent runs)."""
    from kokoro_server.engines.onnx_engine import THREADS_ENV, OnnxEngine
    from kokoro_server.model_dir import open_model_dir

    with mock.patch.dict(os.environ, {THREADS_ENV: "1"}):
        engine = OnnxEngine(model=open_model_dir(model_dir))
    if not hasattr(engine, "_lock"):  # else the lanes side would measure runs one at a time, silently
        raise RuntimeError("OnnxEngine no longer serializes its runs with _lock: lift what does instead")
    engine._lock = contextlib.nullcontext()  # type: ignore[assignment]  # the lanes: what is measured
    return engine


def _figures(result: dict[str, Any]) -> dict[str, float]:
    firsts = [caller["first_s"] for caller in result["callers"]]
    return {"total_s": result["total_s"], "cpu_s": result["cpu_s"], "decoded_per_heard": result["decoded_per_heard"],
            "decoder_calls": result["decoder_calls"], "first_s": firsts[0], "last_first_s": max(firsts)}


def measure(model_dir: Path, rounds: int, log: Callable[[str], None]) -> dict[str, Any]:
    sides = {"serial": Sides(model_dir), "lanes": Sides(model_dir, engine=lane_engine(model_dir), workers=2)}
    cases = [(f"{name}_{what}", side, texts) for name, side in sides.items()
             for what, texts in (("four", [side.text] * CONCURRENT), ("alone", [side.text]))]
    found: dict[str, list[dict[str, float]]] = {case: [] for case, _, _ in cases}
    for round_ in range(rounds):
        shift = round_ % len(cases)
        for case, side, texts in cases[shift:] + cases[:shift]:
            found[case].append(_figures(side.ours(texts)))
            log(f"round {round_ + 1}/{rounds} {case}: {found[case][-1]}")
    median = {case: {k: round(statistics.median(r[k] for r in rows), 4) for k in FIGURES}
              for case, rows in found.items()}
    over = {what: {k: round(median[f"lanes_{what}"][k] / median[f"serial_{what}"][k], 3) for k in FIGURES}
            for what in ("four", "alone")}
    costs = {name: {"pace": round(side.cost.pace, 4), "overhead_s": round(side.cost.overhead, 4)}
             for name, side in sides.items()}
    return {"fitted_cost": costs, "median": median, "lanes_over_serial": over, "runs": found}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lanes_speech", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "kokoro-82m-onnx")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    measured = measure(args.model_dir, args.rounds, lambda line: print(line, file=sys.stderr, flush=True))
    result = {
        "what": f"{CONCURRENT} paragraphs at once and one alone through the server's path, one job at a time on "
                "every core (serial) or two at once on one core each (lanes); medians of the rounds",
        "model_dir": args.model_dir.name, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m bench.lanes_speech " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cpus": os.cpu_count(), "rounds": args.rounds, **measured,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("fitted_cost", "median", "lanes_over_serial")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
