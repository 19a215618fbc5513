"""Where the int8 vocoder's time goes, by operator, on one core and on all of them: which of its
operators onnxruntime's intra-op threads speed up, and which run on one core while the others wait
(docs/design-notes.md, "Where the vocoder's time goes").

    .venv-kokoro/bin/python -m bench.onnx_ops --out bench/results/onnx_ops.json

The engine's vocoder part (engines/onnx_split.py) over the 35-word sentence (bench/engine_vs_loop.py's
LONG, voice af_heart), its inputs made by the engine's front, source and body parts, on two sessions
with the engine's options: one intra-op thread, and ``os.cpu_count()``. Rounds alternate the two;
onnxruntime's profiler times every node of every run. Per operator type: its kernel seconds a run
(median of the rounds) on each session, its share of the all-cores run, and ``speedup``, one
thread's time over all cores'.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from .engine_vs_loop import LONG
from .onnx_lanes import one_sentence_args, one_sentence_record, sentence_feed


def vocoder_and_inputs(model_dir: Path, text: str) -> tuple[bytes, dict[str, Any], int]:
    """The vocoder part of the model's graph, its inputs for ``text`` and the sentence's frames."""
    import onnxruntime as ort

    from kokoro_server.engines.onnx_engine import session_options
    from kokoro_server.engines.onnx_signature import of_graph, signature
    from kokoro_server.engines.onnx_split import BODY, ENERGY, F0, FEATURES, SOURCE, read_graph, split_graph
    from kokoro_server.model_dir import open_model_dir

    model = open_model_dir(model_dir)
    graph = read_graph(model.weights)
    assert graph is not None, "bench.onnx_ops needs the onnx package (the Kokoro environment has it)"
    sig = signature(*of_graph(graph), model.weights)
    split = split_graph(graph, name=model.weights.name, tokens=sig.tokens, style=sig.style, speed=sig.speed,
                        audio=sig.audio)
    assert split is not None and split.body is not None and split.vocoder is not None, "no vocoder to cut"

    def run(part: bytes, outputs: list[str], feeds: dict[str, Any]) -> list[Any]:
        session = ort.InferenceSession(part, session_options(os.cpu_count() or 1), providers=["CPUExecutionProvider"])
        return session.run(outputs, {i.name: feeds[i.name] for i in session.get_inputs()})  # type: ignore[no-any-return]

    feeds = sentence_feed(model, sig, text)
    features, f0, energy = run(split.front, [FEATURES, F0, ENERGY], feeds)
    (source,) = run(split.source, [SOURCE], {F0: f0})
    style = feeds[sig.style]
    (body,) = run(split.body, [BODY], {FEATURES: features, F0: f0, ENERGY: energy, sig.style: style})
    return split.vocoder, {BODY: body, F0: f0, sig.style: style, SOURCE: source}, int(features.shape[2])


def kernel_seconds(profile: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per run in an onnxruntime profile, seconds of kernel time by operator type."""
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in profile if e.get("name") == "model_run")
    found: list[dict[str, float]] = [defaultdict(float) for _ in runs]
    for event in profile:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        for i, (began, ended) in enumerate(runs):
            if began <= event["ts"] <= ended:
                found[i][event["args"]["op_name"]] += event["dur"] / 1e6
                break
    return [dict(run) for run in found]


def measure(model_dir: Path, rounds: int, text: str = LONG) -> dict[str, Any]:
    import onnxruntime as ort

    from kokoro_server.engines.onnx_engine import session_options

    vocoder, feeds, frames = vocoder_and_inputs(model_dir, text)
    threads = {"one_thread": 1, "all_cores": os.cpu_count() or 1}
    walls: dict[str, list[float]] = {name: [] for name in threads}
    ops: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sessions = {}
        for name, count in threads.items():
            options = session_options(count)
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(tmp) / name)
            sessions[name] = ort.InferenceSession(vocoder, options, providers=["CPUExecutionProvider"])
            sessions[name].run(None, feeds)  # warm-up: its profile is dropped below
        for round_ in range(rounds):
            for name in (threads if round_ % 2 == 0 else reversed(threads)):
                began = time.perf_counter()
                sessions[name].run(None, feeds)
                walls[name].append(round(time.perf_counter() - began, 4))
        for name, session in sessions.items():
            ops[name] = kernel_seconds(json.loads(Path(session.end_profiling()).read_text()))[1:]
    median = {name: {op: statistics.median(run.get(op, 0.0) for run in runs) for op in runs[0]}
              for name, runs in ops.items()}
    total = sum(median["all_cores"].values())
    table = [{"op": op, "one_thread_s": round(median["one_thread"].get(op, 0.0), 4), "all_cores_s": round(s, 4),
              "share": round(s / total, 4), "speedup": round(median["one_thread"].get(op, 0.0) / s, 2) if s else None}
             for op, s in sorted(median["all_cores"].items(), key=lambda item: -item[1])]
    return {"frames": frames, "threads": threads, "wall_s": walls,
            "median_wall_s": {name: round(statistics.median(w), 4) for name, w in walls.items()}, "ops": table}


def main(argv: list[str] | None = None) -> int:
    args = one_sentence_args("bench.onnx_ops", __doc__, argv, rounds=3)
    return one_sentence_record("bench.onnx_ops", "the int8 vocoder's kernel seconds a run by operator type, one "
                               "thread against all cores; medians of the rounds", args, argv,
                               measure(args.model_dir, args.rounds, args.text), ("median_wall_s", "ops"))


if __name__ == "__main__":
    raise SystemExit(main())
