"""Our engine path against a plain loop over the same text (what Kokoro-FastAPI runs), in one process.

    .venv-kokoro/bin/python -m bench.engine_vs_loop --model-dir DIR --out bench/results/engine_vs_loop-torch.json

Sides, over the agent answer's first eight sentences as one paragraph (bench/throughput.py):

* ``ours``: the server's Speech (G2P in its own thread ahead of the model, deadline scheduler,
  windowed decoding cut at the decoder cost the server fits to the windows it decodes (here fitted
  once at the start, to four paragraphs at once), sentences joined once the listener is ahead)
  from the first job to the last audio; also four paragraphs at once, a second caller (a short
  sentence 0.3 s into a paragraph) and the short sentence alone, windowed and one-shot
  (bench/variants.py's one_shot), and a short answer's whole cost: the 6-word sentence and a
  35-word one alone, to their last audio, and their CPU; ``ours_sentence_jobs``: the paragraph alone and four at once
  with one model job per sentence (bench/variants.py's sentence_jobs), what joining sentences
  gains; ``ours_linear_pace``: the paragraph alone and four at once with windows cut by the
  warm-up pace alone, what fitting the decoder's cost per call gains (pace.PaceMeter);
  ``ours_wide_seams``: the paragraph, four at once and both answers with each window decoded whole
  over the features' context, as before the vocoder was cut from the decoder's body
  (bench/variants.py's wide_seams), what the cheaper seam gains;
* ``loop_sentence``: sentence after sentence, G2P then the model in one shot (kokoro's own
  ``KPipeline`` and ``KModel`` on a torch model directory; our Phonemizer and the engine's one-shot
  decoding on an onnx one); ``loop_chunk``: the paragraph phonemized whole first, then the model
  per chunk of at most 510 phonemes, as Kokoro-FastAPI does with its 175-250 token chunks.

Rounds are interleaved (the side order rotates each round) and medians reported: this 2-core host
is shared and noisy, so a figure from one round means little. Every side runs in one worker thread
(bench/throughput.py says why). CPU seconds are the process's (every thread), per audio second.
The loops' four-in-a-row and second-caller figures are derived from their measured single runs
(a loop serves one caller at a time): four in sequence take 4x one paragraph, and a caller
arriving 0.3 s into a paragraph waits for its end, then for its own first audio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .engine_sides import CONCURRENT, Sides

SHORT = "Start with where the router sits."  # 6 words (bench/design.py's)
LONG = ("Routers work best in the open, up high and near the middle of your home, because walls, "
        "mirrors and fish tanks all soak up the signal before it reaches the rooms that need it.")  # 35 (design's)
SECOND_CALLER_AFTER_S = 0.3
SENTENCE_JOBS = ("sentence_jobs",)
# ours with one part of the engine as it was before it, in the same run: what each part gains
ATTRIBUTED = ("sentence_jobs", "linear_pace", "wide_seams")
WIDE_SEAMS = ("wide_seams",)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def measure(sides: Sides, rounds: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Every side once per round, the order rotating; per side the rounds' figures."""
    cases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("ours", sides.ours_paragraph),
        ("ours_sentence_jobs", lambda: sides.ours_paragraph(SENTENCE_JOBS)),
        ("ours_linear_pace", lambda: sides.ours_paragraph(linear_pace=True)),
        ("loop_sentence", sides.loop_sentence),
        ("loop_chunk", sides.loop_chunk),
        ("ours_concurrent", lambda: sides.ours([sides.text] * CONCURRENT)),
        ("ours_concurrent_sentence_jobs", lambda: sides.ours([sides.text] * CONCURRENT, variants=SENTENCE_JOBS)),
        ("ours_concurrent_linear_pace", lambda: sides.ours([sides.text] * CONCURRENT, linear_pace=True)),
        ("ours_wide_seams", lambda: sides.ours_paragraph(WIDE_SEAMS)),
        ("ours_concurrent_wide_seams", lambda: sides.ours([sides.text] * CONCURRENT, variants=WIDE_SEAMS)),
        ("ours_second_caller", lambda: sides.ours([sides.text, SHORT], starts=[0.0, SECOND_CALLER_AFTER_S])),
        ("ours_short", lambda: sides.ours([SHORT])["callers"][0]),
        ("ours_short_one_shot", lambda: sides.ours([SHORT], variants=("one_shot",))["callers"][0]),
        ("loop_short", lambda: sides.loop_sentence(SHORT)),
        ("ours_short_wide_seams", lambda: sides.ours([SHORT], variants=WIDE_SEAMS)["callers"][0]),
        ("ours_long", lambda: sides.ours([LONG])["callers"][0]),
        ("ours_long_wide_seams", lambda: sides.ours([LONG], variants=WIDE_SEAMS)["callers"][0]),
        ("loop_long", lambda: sides.loop_sentence(LONG)),
    ]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in cases}
    worker = ThreadPoolExecutor(1)
    try:
        for index in range(rounds):
            shift = index % len(cases)
            for name, case in cases[shift:] + cases[:shift]:
                runs[name].append(worker.submit(case).result())
                log(f"round {index + 1}/{rounds} {name}: {json.dumps(_rounded(runs[name][-1]))}")
    finally:
        worker.shutdown()
    return runs


def _rounded(found: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in found.items() if k != "callers"}


def loop_second_caller_first(paragraph_s: float, short_first_s: float) -> float:
    """A loop serves one caller at a time: one arriving SECOND_CALLER_AFTER_S into a paragraph
    waits for the paragraph's end, then for its own first audio."""
    return paragraph_s - SECOND_CALLER_AFTER_S + short_first_s


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per side (the rows), and each target ratio as the median of its rounds' ratios: the
    sides of one round ran minutes apart, so a host that drifts from round to round (stolen CPU
    time) moves both sides of a round's ratio alike, where a ratio of medians can pair a fast
    round's figure with a slow one's (docs/throughput.md)."""
    def med(name: str, key: str) -> float:
        return _median([r[key] for r in runs[name]])

    attributed = [side for side in ATTRIBUTED if runs.get(f"ours_{side}")]  # results from before a side still read

    paragraph_rows = {name: {"first_s": med(name, "first_s"), "total_s": med(name, "total_s"),
                             "cpu_per_audio_s": _median([r["cpu_s"] / r["audio_s"] for r in runs[name]]),
                             "audio_s": med(name, "audio_s"),
                             **({"decoded_per_heard": med(name, "decoded_per_heard")}
                                if "decoded_per_heard" in runs[name][0] else {})}
                      for name in ("ours", *(f"ours_{side}" for side in attributed), "loop_sentence", "loop_chunk")}
    concurrent_wall = med("ours_concurrent", "total_s")
    attributed_wall = {side: med(f"ours_concurrent_{side}", "total_s") for side in attributed}
    decoded = {f"ours{side}_decoded_per_heard": med(f"ours_concurrent{side}", "decoded_per_heard")
               for side in ("", *(f"_{a}" for a in attributed))
               if "decoded_per_heard" in runs[f"ours_concurrent{side}"][0]}
    concurrent_first_p50 = _median([statistics.median(c["first_s"] for c in r["callers"])
                                    for r in runs["ours_concurrent"]])
    loop_total = paragraph_rows["loop_sentence"]["total_s"]
    chunk_total = paragraph_rows["loop_chunk"]["total_s"]
    second_ours = _median([r["callers"][1]["first_s"] for r in runs["ours_second_caller"]])
    second_loop = round(loop_second_caller_first(chunk_total, med("loop_short", "first_s")), 4)
    short = {"ours_first_s": med("ours_short", "first_s"),
             "ours_one_shot_first_s": med("ours_short_one_shot", "first_s"),
             "loop_first_s": med("loop_short", "first_s")}
    answers = {size: {side: {"first_s": med(f"{side}_{size}", "first_s"), "total_s": med(f"{side}_{size}", "total_s"),
                             "cpu_s": med(f"{side}_{size}", "cpu_s")} for side in ("ours", "loop")}
               for size in ("short", "long") if runs.get(f"ours_{size}") and "cpu_s" in runs[f"ours_{size}"][0]}
    for size, sides_ in answers.items():
        if runs.get(f"ours_{size}_wide_seams"):
            sides_["ours_wide_seams"] = {key: med(f"ours_{size}_wide_seams", key)
                                         for key in ("first_s", "total_s", "cpu_s")}
    rows: dict[str, Any] = {
        "paragraph": paragraph_rows,
        "concurrent": {"callers": CONCURRENT, "ours_wall_s": concurrent_wall, "ours_first_p50_s": concurrent_first_p50,
                       **{f"ours_{side}_wall_s": wall for side, wall in attributed_wall.items()}, **decoded,
                       "loop_sentence_x4_s": round(CONCURRENT * loop_total, 4),
                       "loop_chunk_x4_s": round(CONCURRENT * chunk_total, 4)},
        "second_caller": {"after_s": SECOND_CALLER_AFTER_S, "ours_first_s": second_ours,
                          "loop_chunk_first_s": second_loop},
        "short": {"text": SHORT, **short},
        "answers": {"short": SHORT, "long": LONG, **answers},
    }
    def total(name: str) -> Callable[[int], float]:
        return lambda i: float(runs[name][i]["total_s"])

    def first(name: str) -> Callable[[int], float]:
        return lambda i: float(runs[name][i]["first_s"])

    def cpu_per_audio(name: str) -> Callable[[int], float]:
        return lambda i: float(runs[name][i]["cpu_s"] / runs[name][i]["audio_s"])

    def cpu(name: str) -> Callable[[int], float]:
        return lambda i: float(runs[name][i]["cpu_s"])

    def second_caller_loop(i: int) -> float:
        return loop_second_caller_first(total("loop_chunk")(i), first("loop_short")(i))

    ratios = {
        "total_over_loop_sentence": (total("ours"), total("loop_sentence")),
        "total_over_loop_chunk": (total("ours"), total("loop_chunk")),
        **{f"total_over_{side}": (total("ours"), total(f"ours_{side}")) for side in attributed},
        "cpu_per_audio_over_loop_sentence": (cpu_per_audio("ours"), cpu_per_audio("loop_sentence")),
        "cpu_per_audio_over_loop_chunk": (cpu_per_audio("ours"), cpu_per_audio("loop_chunk")),
        "concurrent_wall_over_loop_sentence_x4":
            (total("ours_concurrent"), lambda i: CONCURRENT * total("loop_sentence")(i)),
        **{f"concurrent_wall_over_{side}": (total("ours_concurrent"), total(f"ours_concurrent_{side}"))
           for side in attributed},
        "first_over_loop_sentence": (first("ours"), first("loop_sentence")),
        "first_over_loop_chunk": (first("ours"), first("loop_chunk")),
        "second_caller_first_over_loop":
            (lambda i: float(runs["ours_second_caller"][i]["callers"][1]["first_s"]), second_caller_loop),
        "short_first_over_one_shot": (first("ours_short"), first("ours_short_one_shot")),
        **{f"{size}_{kind}_over_loop": (measure_(f"ours_{size}"), measure_(f"loop_{size}"))
           for size in answers for kind, measure_ in (("total", total), ("cpu", cpu), ("first", first))},
        **{f"{size}_{kind}_over_wide_seams": (measure_(f"ours_{size}"), measure_(f"ours_{size}_wide_seams"))
           for size in answers if runs.get(f"ours_{size}_wide_seams")
           for kind, measure_ in (("total", total), ("cpu", cpu), ("first", first))},
    }
    rounds = min(len(found) for found in runs.values())
    limits = {"total_over_loop_sentence": 1.0, "cpu_per_audio_over_loop_sentence": 1.05,
              "concurrent_wall_over_loop_sentence_x4": 1.1, "first_over_loop_sentence": 1.0,
              "first_over_loop_chunk": 0.5, "second_caller_first_over_loop": 0.3, "short_first_over_one_shot": 1.0,
              **{f"{size}_{kind}_over_loop": 1.0 for size in answers for kind in ("total", "cpu", "first")}}
    targets = []
    for name, (top, bottom) in ratios.items():  # paired: both sides from the same round, minutes apart
        value = statistics.median(top(i) / bottom(i) for i in range(rounds))
        targets.append({"ratio": name, "value": round(value, 3), "at_most": limits.get(name),
                        "met": None if name not in limits else value <= limits[name]})
    return {"rows": rows, "targets": targets}


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) jiffies of this machine's CPUs (/proc/stat; zeros where there is none)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of CPU time the hypervisor gave to other guests between two readings: a virtual
    machine's cores are not all ours while it is high, and wall times stretch with it."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.engine_vs_loop", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    import os
    import sys

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    began, stolen = time.perf_counter(), cpu_ticks()
    sides = ThreadPoolExecutor(1).submit(Sides, args.model_dir).result()
    runs = measure(sides, args.rounds, log)
    load = os.getloadavg()
    result = {
        "command": f"python -m bench.engine_vs_loop --model-dir {args.model_dir.name} --rounds {args.rounds}",
        "engine": sides.engine.name, "device": sides.engine.device, "voice": sides.voice,
        "loop": "kokoro KPipeline + KModel" if sides.pipeline is not None else "Phonemizer + one-shot engine",
        "sentences": 8, "chars": len(sides.text), "rounds": args.rounds, "decoder_pace": round(sides.pace, 4),
        "decoder_cost": {"pace": round(sides.cost.pace, 4), "overhead_s": round(sides.cost.overhead, 4)},
        "cpus": os.cpu_count(), "load_average_after": [round(x, 2) for x in load],
        "steal_share": steal_share(stolen, cpu_ticks()),
        "seconds": round(time.perf_counter() - began, 1),
        **summarize(runs),
        "runs": {name: [_rounded(r) | ({"callers": [_rounded(c) for c in r["callers"]]} if "callers" in r else {})
                        for r in found] for name, found in runs.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"targets": result["targets"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
