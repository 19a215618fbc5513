"""What a chunk's first seam does to the words a listener hears: the by-ear corpus's short
sentences cut in two, with the vocoder's context after the first window (``Seams.opening``) and the
crossfade at the server's values and at smaller ones, judged by pocketsphinx (the int8 onnx model,
voice af_heart).

    .venv-kokoro/bin/python -m bench.seams_by_ear --out bench/results/seams_by_ear.json

The vocoder normalises over the span it renders, and the export quantizes its activations by each
render's range, so a chunk's first window, rendered over a short span, is the one a seam changes
most (engines/windows.py, OPENING_CONTEXT). The job sizer cuts a short sentence in two where its
whole decoding takes longer than ``first_audio_s`` (sizing.py, rule 4), at a first window of 20
frames or more. Each sentence of normalization_corpus.TEST_SUBSET (the sentences
tests/kokoro/test_normalize_by_ear.py hears), and the 35-word one of the engine benches, is decoded
once in one shot and then as two windows, the first of ``FIRSTS`` frames, for every seam of
``SEAMS``; no rounds: the renders are deterministic, the judge is not a listener (one word misheard
in a 5-word sentence is 0.2 of its rate), so read the means over all cuts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .engine_vs_loop import LONG
from .hearing import recognise, wer, words
from .normalization_corpus import CORPUS, TEST_SUBSET
from .onnx_lanes import REPO

FIRSTS = (20, 30, 40, 50, 60)
"""A first window's own frames: rule 4's smallest (first_frames) and up."""
SEAMS = ((20, 8), (14, 8), (10, 8), (6, 8), (20, 4), (6, 4))
"""(opening, crossfade) in frames: the server's first, then less context after the first window
(6 is what a later window renders), then a shorter crossfade."""


def measure(model_dir: Path, log: Any) -> dict[str, Any]:
    from kokoro_server.engines import load_engine
    from kokoro_server.engines.windows import Decoding, Seams
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import open_model_dir, style_for

    model = open_model_dir(model_dir)
    engine = load_engine(model)
    phonemizer = Phonemizer()
    pack = model.voices["af_heart"]
    sentences = [*(CORPUS[i] for i in TEST_SUBSET), ("35 words", LONG, " ".join(words(LONG)))]  # no numbers to read
    found: list[dict[str, Any]] = []
    for name, written, reference in sentences:
        (chunk,) = phonemizer.chunks(written, voice="af_heart")
        front = engine.begin(chunk.phonemes, style_for(pack, chunk.phonemes), 1.0)
        one_shot = wer(recognise(front.rest()), reference)  # its decode still renders the cuts below
        cuts: dict[str, float] = {}
        for first in (f for f in FIRSTS if f <= front.frames - 20):  # a rest under 20 frames joins the first
            for opening, crossfade in SEAMS:
                decoding = Decoding(frames=front.frames, decode=front.decode,
                                    seams=Seams(opening=opening, crossfade=crossfade))
                audio = np.concatenate([decoding.step(first), decoding.rest()])
                cuts[f"{first}/{opening}/{crossfade}"] = round(wer(recognise(audio), reference), 3)
        found.append({"name": name, "text": written, "frames": front.frames, "one_shot_wer": round(one_shot, 3),
                      "cuts_wer": cuts})
        log(f"{name}: {front.frames} frames, one shot {one_shot:.2f}, cuts {cuts}")
    return {"sentences": found, "mean_wer": _means(found)}


def _means(found: list[dict[str, Any]]) -> dict[str, float]:
    """Per seam (``opening/crossfade``), the mean rate over every sentence and first window; and
    the one-shot renders' mean over the same sentences, once for each of their cuts."""
    by_seam: dict[str, list[float]] = {f"{o}/{x}": [] for o, x in SEAMS}
    one_shot: list[float] = []
    for sentence in found:
        for key, rate in sentence["cuts_wer"].items():
            by_seam[key.split("/", 1)[1]].append(rate)
        one_shot += [sentence["one_shot_wer"]] * (len(sentence["cuts_wer"]) // len(SEAMS))
    return {"one_shot": round(statistics.fmean(one_shot), 3),
            **{seam: round(statistics.fmean(rates), 3) for seam, rates in by_seam.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.seams_by_ear", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "kokoro-82m-onnx")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    measured = measure(args.model_dir, lambda line: print(line, file=sys.stderr, flush=True))
    result = {
        "what": "short sentences cut in two at several first windows, per seam (opening/crossfade frames): "
                "pocketsphinx's word error rate against the text as read",
        "model_dir": args.model_dir.name, "voice": "af_heart", "firsts": list(FIRSTS),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m bench.seams_by_ear " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cpus": os.cpu_count(), "seconds": round(time.perf_counter() - started, 1), **measured,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["mean_wer"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
