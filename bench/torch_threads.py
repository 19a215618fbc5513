"""What it costs to run torch on a thread other than the one that loaded the model (docs/throughput.md).

    .venv-kokoro/bin/python -m bench.torch_threads --out bench/results/torch_threads.json

On a CPU torch runs each op on an OpenMP team of the calling thread. Each case runs in a fresh
process (teams live as long as their thread) and times a 6-word sentence, front and decoder in one
call, on the tiny model: medians of ``--runs`` after three warm-up runs.

* ``one_thread``: kokoro's own KModel, loaded and run on the main thread (Kokoro-FastAPI's way: its
  pipeline runs on the event loop's thread);
* ``two_threads``: the same KModel loaded on the main thread and run on another (the server before
  the torch engine had a thread of its own: it decoded on the scheduler's worker);
* ``engine``: our TorchEngine, loaded from the main thread and asked from another; it runs every
  torch call on its own thread (engines/torch_engine.py).

``threads``: the process's threads after the runs (an OpenMP team's threads among them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .engine_vs_loop import SHORT

REPO = Path(__file__).resolve().parents[1]
CASES = ("one_thread", "two_threads", "engine")
WARM_UP_RUNS = 3


def _sentence(model_dir: Path, case: str) -> Callable[[], Any]:
    """One call that speaks SHORT whole on the case's model (built on the calling thread)."""
    import torch

    from kokoro_server.engines import load_engine
    from kokoro_server.engines.torch_engine import build_kmodel, load_checkpoint_strictly
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import open_model_dir, style_for

    model = open_model_dir(model_dir)
    (phonemes,) = Phonemizer().phonemize(SHORT, voice="af_heart")
    style = style_for(model.voices["af_heart"], phonemes)
    if case == "engine":
        engine = load_engine(model)
        return lambda: engine.synthesize(phonemes, style, 1.0)
    torch.set_flush_denormal(True)  # as the engine does
    kmodel = build_kmodel(model.config)
    load_checkpoint_strictly(kmodel, model.weights)
    kmodel.eval()
    ref_s = torch.from_numpy(style).reshape(1, -1)

    def speak() -> Any:
        with torch.inference_mode():
            return kmodel(phonemes, ref_s, 1.0)

    return speak


def run_case(model_dir: Path, case: str, runs: int) -> dict[str, Any]:
    """Time ``case`` in this process: seconds per sentence, and the threads it left."""
    speak = _sentence(model_dir, case)

    def timed() -> float:
        began = time.perf_counter()
        speak()
        return time.perf_counter() - began

    if case == "one_thread":
        times = [timed() for _ in range(WARM_UP_RUNS + runs)]
    else:
        with ThreadPoolExecutor(1, thread_name_prefix="asker") as asker:
            times = [asker.submit(timed).result() for _ in range(WARM_UP_RUNS + runs)]
    return {"median_s": round(statistics.median(times[WARM_UP_RUNS:]), 4),
            "threads": len(os.listdir("/proc/self/task"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.torch_threads", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "bench-tiny")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="each case's process, this many times, interleaved")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # one case, in this process
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.model_dir, args.case, args.runs)))
        return 0
    found: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    for _ in range(args.rounds):
        for case in CASES:
            done = subprocess.run(
                [sys.executable, "-m", "bench.torch_threads", "--case", case, "--runs", str(args.runs),
                 "--model-dir", str(args.model_dir)],
                cwd=REPO, capture_output=True, text=True, check=True)
            found[case].append(json.loads(done.stdout.strip().splitlines()[-1]))
    medians = {case: statistics.median(r["median_s"] for r in rows) for case, rows in found.items()}
    result = {
        "what": "a 6-word sentence in one call on the tiny torch model: medians of each process's median",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m bench.torch_threads " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cpus": os.cpu_count(), "runs": args.runs, "rounds": args.rounds,
        "seconds": {case: round(value, 4) for case, value in medians.items()},
        "over_one_thread": {case: round(value / medians["one_thread"], 3) for case, value in medians.items()},
        "processes": found,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("seconds", "over_one_thread")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
