"""Whether two decoder calls at once, one core each, would decode more than one call at a time on
both cores: the int8 onnx model on this host (docs/design-notes.md, "A lone sentence pays for its
cut").

    .venv-kokoro/bin/python -m bench.onnx_lanes --out bench/results/onnx_lanes.json

The server runs one model call at a time on every core (onnxruntime's intra-op pool,
engines/onnx_engine.py). Each case makes two calls of the whole graph on the 35-word sentence
(bench/engine_vs_loop.py's LONG, voice af_heart) with the engine's session options:

* ``serial``: one after the other, on a session of ``os.cpu_count()`` threads (the server's way);
* ``lanes``: both at once from two threads, on a session of one thread;
* ``oversubscribed``: both at once on the ``serial`` session (twice the threads the cores have);
* ``one_lane``: one call alone on the one-thread session, twice (what a lone listener would wait
  for on a lane).

Per case the wall and process CPU seconds of its two calls; rounds interleave the cases (this host
is noisy); ``over_serial`` is each case's median over ``serial``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .engine_vs_loop import LONG

if TYPE_CHECKING:
    from kokoro_server.engines.onnx_signature import Signature
    from kokoro_server.model_dir import ModelDir

REPO = Path(__file__).resolve().parents[1]
CASES = ("serial", "lanes", "oversubscribed", "one_lane")


def sentence_feed(model: ModelDir, sig: Signature, text: str) -> dict[str, Any]:
    """The whole graph's inputs for one sentence of ``text`` in voice af_heart at speed 1, as the
    engine builds them: pad, the phonemes' vocab ids, pad (symbols the vocab lacks dropped)."""
    import numpy as np

    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import style_for

    (phonemes,) = Phonemizer().phonemize(text, voice="af_heart")
    ids = [model.vocab[p] for p in phonemes if p in model.vocab]
    return {sig.tokens: np.array([[0, *ids, 0]], dtype=sig.tokens_dtype),
            sig.style: style_for(model.voices["af_heart"], phonemes).reshape(1, -1).astype(np.float32),
            sig.speed: np.ones(sig.speed_shape, dtype=sig.speed_dtype)}


def _calls(model_dir: Path, text: str) -> dict[str, Callable[[], None]]:
    """Each case's pair of calls, ready to time."""
    import onnxruntime as ort

    from kokoro_server.engines.onnx_engine import session_options
    from kokoro_server.engines.onnx_signature import of_session, signature
    from kokoro_server.model_dir import open_model_dir

    model = open_model_dir(model_dir)
    serial = ort.InferenceSession(str(model.weights), session_options(os.cpu_count() or 1),
                                  providers=["CPUExecutionProvider"])
    lane = ort.InferenceSession(str(model.weights), session_options(1), providers=["CPUExecutionProvider"])
    feed = sentence_feed(model, signature(*of_session(serial), model.weights), text)

    def at_once(session: Any) -> None:
        threads = [threading.Thread(target=session.run, args=(None, feed)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def one_after_other(session: Any) -> None:
        for _ in range(2):
            session.run(None, feed)

    calls: dict[str, Callable[[], None]] = {"serial": lambda: one_after_other(serial), "lanes": lambda: at_once(lane),
             "oversubscribed": lambda: at_once(serial), "one_lane": lambda: one_after_other(lane)}
    for call in calls.values():
        call()  # warm-up
    return calls


def measure(model_dir: Path, rounds: int, text: str = LONG) -> dict[str, list[dict[str, float]]]:
    calls = _calls(model_dir, text)
    found: dict[str, list[dict[str, float]]] = {case: [] for case in CASES}
    for round_ in range(rounds):
        for case in CASES[round_ % len(CASES):] + CASES[:round_ % len(CASES)]:
            cpu, wall = time.process_time(), time.perf_counter()
            calls[case]()
            found[case].append({"wall_s": round(time.perf_counter() - wall, 4),
                                "cpu_s": round(time.process_time() - cpu, 4)})
    return found


def one_sentence_args(module: str, doc: str, argv: list[str] | None, *, rounds: int,
                      model_dir: Path = REPO / "models" / "kokoro-82m-onnx") -> argparse.Namespace:
    """The options of a bench of one sentence: --model-dir (by default the int8 model), --rounds,
    --text, --out."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=model_dir)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--text", default=LONG, help="one sentence (default: the 35-word one)")
    parser.add_argument("--out", type=Path)
    return parser.parse_args(argv)


def one_sentence_record(module: str, what: str, args: argparse.Namespace, argv: list[str] | None,
                        measured: dict[str, Any], shown: tuple[str, ...]) -> int:
    """Write a one-sentence bench's record to ``args.out`` (when given): what it is, when and how it
    ran, then ``measured``; print the ``shown`` fields of it. The bench's exit status."""
    result = {
        "what": what, "text": args.text, "model_dir": args.model_dir.name,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": f"python -m {module} " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cpus": os.cpu_count(), "rounds": args.rounds, **measured,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({name: result[name] for name in shown}))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = one_sentence_args("bench.onnx_lanes", __doc__, argv, rounds=5)
    found = measure(args.model_dir, args.rounds, args.text)
    median = {case: {k: statistics.median(r[k] for r in rows) for k in ("wall_s", "cpu_s")}
              for case, rows in found.items()}
    measured = {
        "median": {case: {k: round(v, 4) for k, v in m.items()} for case, m in median.items()},
        "over_serial": {case: {k: round(m[k] / median["serial"][k], 3) for k in m} for case, m in median.items()},
        "runs": found,
    }
    return one_sentence_record("bench.onnx_lanes", "two calls of the whole int8 graph on one sentence per case; "
                               "medians of the rounds", args, argv, measured, ("median", "over_serial"))


if __name__ == "__main__":
    raise SystemExit(main())
