"""Windowed vs one-shot decoding on the real weights: quality, first audio and stall per window plan.

    .venv-kokoro/bin/python -m bench.windowing [--quick] [--out bench/results/windowing.json]

For a 6-word and a 37-word sentence (the packaged int8 ONNX Kokoro-82M, voice af_heart) it renders
the one-shot reference, two measures of the model's own variation (the neighbouring style row,
pack[n-2] instead of pack[n-1]; and the same frames with the last one dropped), then each window
plan: log-mel distance, PESQ wideband and SNR against one-shot, the largest sample jump at a seam against the
one-shot audio's largest and 99.9th-percentile jumps, the word error rate of an offline
recognizer (pocketsphinx's US English model; compare plans with one-shot, whose rate is not zero
either), time to the first window, and
the stall a real-time listener would hear (playback starting with the first window). Times are
wall-clock on this machine under whatever load it has: the JSON records the load average.
A plan here is a :class:`Shape`: windows of ``first`` frames, then each ``growth`` times all
before it, at most ``largest``, with its context and crossfade (the geometric windows the server
cut before its job sizer; they still span what windows of each size do to the audio).
``paced``: the windows the server's job sizer (kokoro_server/sizing.py) gives one listener alone
here, at this machine's decoder pace measured as the server measures it at warm-up (``pace`` in
the JSON; ``--pace`` pins it) and the listener's real queue as the windows come.

Attribution (not with --quick): the same comparisons with the decoder's activations in float
(bench/float_decoder.py), which separates the export's dynamic int8 quantization (every render
depends on the whole tensor's range) from what the windows themselves change.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .audio_metrics import jumps, largest_jump_near, log_mel_distance, pesq_wideband, snr_db
from .hearing import recognise, wer

if TYPE_CHECKING:
    from kokoro_server.engines import Decoding, Engine
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import ModelDir

REPO = Path(__file__).resolve().parent.parent
SENTENCES = {
    "6 words": "Start with where the router sits.",
    "37 words": ("Routers work best in the open, up high and near the middle of your home, because walls, "
                 "mirrors and fish tanks all soak up the signal before it ever reaches the rooms where you "
                 "need it most."),
}
# (first, growth, largest, context, crossfade) in frames of 25 ms; the first is the default. The
# context is the vocoder's (windows.py; the body sees FEATURE_CONTEXT around it in every plan);
# the second plan renders the body's whole context through the vocoder too, as windows did before
# the decoder was cut in two (20 frames before a window, its crossfade and 20 after).
PLANS = [(20, 4.0, 480, 6, 8), (20, 4.0, 480, 20, 8), (20, 4.0, 480, 2, 8), (20, 4.0, 480, 4, 8),
         (20, 4.0, 480, 10, 8), (20, 2.0, 480, 6, 8), (20, 6.0, 480, 6, 8), (20, 4.0, 480, 6, 4),
         (20, 4.0, 480, 6, 16), (16, 4.0, 480, 6, 8), (20, 1.0, 160, 6, 8)]
QUICK_PLANS = PLANS[:2]


@dataclass(frozen=True)
class Shape:
    """Geometric windows: ``first`` frames, then ``growth`` times all before, at most ``largest``;
    a rest under ``first`` joins the last window."""

    first: int = 20
    growth: float = 4.0
    largest: int = 480
    context: int = 6
    crossfade: int = 8

    def next_size(self, decoding: Decoding, queued_s: float) -> int:
        made = decoding.frames - decoding.left
        size = self.first if not made else min(self.largest, max(self.first, int(round(self.growth * made))))
        return decoding.left if decoding.left - size < self.first else size


def reshaped(decoding: Decoding, shape: Shape) -> Decoding:
    """The same front's frames, decoded with ``shape``'s context and crossfade."""
    from kokoro_server.engines import Decoding
    from kokoro_server.engines.windows import Seams

    return Decoding(frames=decoding.frames, decode=decoding.decode, durations=decoding.durations,
                    seams=Seams(context=shape.context, crossfade=shape.crossfade))
VOICE = "af_heart"  # English (kokoro 0.9.4 sdist, in the packaged directory since make install fetches it)


def word_error_rate(text: str, audio: np.ndarray) -> float | None:
    """pocketsphinx on ``audio`` against ``text`` (bench.hearing); None without pocketsphinx."""
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        return None
    return round(wer(recognise(audio), text), 3)


def measure_plan(engine: Engine, phonemes: str, style: np.ndarray, reference: np.ndarray, shape: Shape,
                 text: str, next_size: Callable[[Decoding, float], int] | None = None) -> dict[str, Any]:
    """``next_size(decoding, queued_s)``: each window's size (default: ``shape``'s), given the audio a
    real-time listener has queued when it starts (playback from the first window)."""
    sizes = next_size or shape.next_size
    started = time.perf_counter()
    decoding = reshaped(engine.begin(phonemes, style, 1.0), shape)
    parts: list[np.ndarray] = []
    ready: list[float] = []
    while not decoding.done:
        made_s = sum(part.size for part in parts) / 24_000
        queued_s = max(0.0, made_s - (time.perf_counter() - started - ready[0])) if ready else 0.0
        parts.append(decoding.step(sizes(decoding, queued_s)))
        ready.append(time.perf_counter() - started)
    audio = np.concatenate(parts)
    clock, stall, played = ready[0], 0.0, 0
    for part, at in zip(parts, ready):
        due = clock + played / 24_000
        if at > due:
            stall += at - due
            clock += at - due
        played += part.size
    per_frame = audio.size // decoding.frames
    seams = [w.end * per_frame for w in decoding.windows[:-1]]
    return {
        "windows": [w.end - w.start for w in decoding.windows],
        "first_audio_ms": round(ready[0] * 1000), "total_ms": round(ready[-1] * 1000),
        "stall_ms": round(stall * 1000), "stall_fraction": round(stall / (audio.size / 24_000), 4),
        "log_mel_db": round(log_mel_distance(reference, audio), 3), "pesq": pesq_wideband(reference, audio),
        "snr_db": round(snr_db(reference, audio), 2),
        "seam_max_jump": round(largest_jump_near(audio, seams, radius=(shape.crossfade + 1) * per_frame), 4),
        "same_length": bool(audio.size == reference.size), "wer": word_error_rate(text, audio),
    }


def attribution(model: ModelDir, phonemizer: Phonemizer, int8: Engine, labels: list[str]) -> dict[str, Any]:
    """The comparisons again with the decoder's activations in float (bench/float_decoder.py);
    ``int8``: the engine serving the export as published."""
    from kokoro_server.engines.onnx_engine import OnnxEngine
    from kokoro_server.model_dir import style_for

    from .float_decoder import float_activation_decoder

    path, rewritten = float_activation_decoder(model.weights)
    try:
        engine = OnnxEngine(model=model, graph=path)
    finally:
        path.unlink()
        path.parent.rmdir()
    pack = model.voices[VOICE]
    found: dict[str, Any] = {"ops_rewritten": rewritten}
    for label in labels:
        phonemes = phonemizer.phonemize(SENTENCES[label], voice=VOICE)[0]
        style = style_for(pack, phonemes)
        whole = engine.begin(phonemes, style, 1.0)
        reference = whole.rest()
        quantized = int8.synthesize(phonemes, style, 1.0).audio
        neighbour = engine.synthesize(phonemes, pack[max(len(phonemes) - 2, 0)], 1.0).audio
        shorter = whole.decode(0, whole.frames - 1, reach=0)
        windowed = np.concatenate(_decoded(reshaped(engine.begin(phonemes, style, 1.0), Shape()), Shape()))
        found[label] = {
            "int8_one_shot_db": round(log_mel_distance(reference, quantized), 3),
            "int8_one_shot_pesq": pesq_wideband(reference, quantized),
            "variation_style_row_db": round(log_mel_distance(reference, neighbour), 3),
            "variation_one_frame_less_db": round(log_mel_distance(reference[:shorter.size], shorter), 3),
            "windowed_default_db": round(log_mel_distance(reference, windowed), 3),
            "windowed_default_pesq": pesq_wideband(reference, windowed),
        }
        print(label, "float decoder", found[label], flush=True)
    return found


def vocoder_share(engine: Any, phonemes: str, style: np.ndarray, *, rounds: int = 3) -> dict[str, float] | None:
    """The onnx engine's decoder body and vocoder (onnx_split.py) timed apart over one sentence in
    one shot, best of ``rounds``: what context costs in each; None for a graph not cut in two."""
    from kokoro_server.engines.onnx_split import BODY, ENERGY, F0, FEATURES, SOURCE

    split = getattr(engine, "_split", None)
    if split is None or engine._body is None:
        return None
    feeds = engine._feeds(phonemes, style, 1.0)
    features, f0, energy = engine._run(engine._front, list(split.front_outputs), feeds)[:3]
    (source,) = engine._run(engine._source, [SOURCE], {F0: f0})
    style_in = np.asarray(style, dtype=np.float32).reshape(1, -1)
    body_feeds = {FEATURES: features, F0: f0, ENERGY: energy, split.style_input: style_in}
    body_s, vocoder_s = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        (body,) = engine._run(engine._body, [BODY], body_feeds)
        body_s.append(time.perf_counter() - started)
        feeds = {BODY: body, F0: f0, split.style_input: style_in, SOURCE: source}
        started = time.perf_counter()
        engine._run(engine._vocoder, [split.audio_output], {k: feeds[k] for k in engine._vocoder_inputs})
        vocoder_s.append(time.perf_counter() - started)
    body_best, vocoder_best = min(body_s), min(vocoder_s)
    return {"frames": int(features.shape[2]), "body_s": round(body_best, 4), "vocoder_s": round(vocoder_best, 4),
            "vocoder_share": round(vocoder_best / (body_best + vocoder_best), 3)}


def _decoded(decoding: Decoding, shape: Shape) -> list[np.ndarray]:
    parts = []
    while not decoding.done:
        parts.append(decoding.step(shape.next_size(decoding, 0.0)))
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.windowing", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {len(QUICK_PLANS)} plans")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "windowing.json")
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "kokoro-82m-onnx")
    parser.add_argument("--pace", type=float, default=None,
                        help="size the paced plan at this decoder pace instead of measuring it (measured: "
                             "depends on the load; pinned: the paced rows' windows, so their quality, repeat)")
    args = parser.parse_args(argv)
    from kokoro_server.engines import load_engine
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import open_model_dir, style_for
    from kokoro_server.sizing import Cost, Situation, Sizer
    from kokoro_tools.packaged_weights import build_model_dir, installed_sources

    model = open_model_dir(build_model_dir(args.model_dir, sources=installed_sources(english=True)).root)
    engine = load_engine(model)
    phonemizer = Phonemizer()
    pack = model.voices[VOICE]
    result: dict[str, Any] = {"load_average_before": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
                    "engine": engine.name, "voice": VOICE, "sentences": {}}
    plans = QUICK_PLANS if args.quick else PLANS
    from kokoro_server.pace import WARM_UP_TEXT, decoder_pace

    warm = phonemizer.phonemize(WARM_UP_TEXT, voice=VOICE)[0]
    engine.synthesize(warm, style_for(pack, warm), 1.0)
    measured = decoder_pace(engine, warm, style_for(pack, warm))  # as the server measures it at warm-up
    pace = measured if args.pace is None else args.pace
    result["pace"] = round(pace, 4)
    sizer, cost = Sizer(), Cost(pace=pace)  # the server's sizer, alone, at this machine's pace

    def served(decoding: Decoding, queued_s: float) -> int:
        return sizer.next_window(Situation(left=decoding.left, started=decoding.started, queued_s=queued_s, cost=cost))

    result["pace_measured"] = round(measured, 4)
    for label, text in SENTENCES.items():
        phonemes = phonemizer.phonemize(text, voice=VOICE)[0]
        style = style_for(pack, phonemes)
        started = time.perf_counter()
        oneshot = engine.begin(phonemes, style, 1.0)
        reference = oneshot.rest()
        oneshot_ms = round((time.perf_counter() - started) * 1000)
        neighbour = engine.synthesize(phonemes, pack[max(len(phonemes) - 2, 0)], 1.0).audio
        shorter = oneshot.decode(0, oneshot.frames - 1, reach=0)
        d = jumps(reference)
        entry = {
            "text": text, "frames": oneshot.frames, "audio_s": round(reference.size / 24_000, 2),
            "one_shot_ms": oneshot_ms,
            "variation_style_row_db": round(log_mel_distance(reference, neighbour), 3),
            "variation_one_frame_less_db": round(log_mel_distance(reference[:shorter.size], shorter), 3),
            "variation_style_row_pesq": pesq_wideband(reference, neighbour),
            "variation_one_frame_less_pesq": pesq_wideband(reference[:shorter.size], shorter),
            "one_shot_jump_p999": round(float(np.percentile(d, 99.9)), 4),
            "one_shot_jump_max": round(float(d.max()), 4),
            "one_shot_wer": word_error_rate(text, reference),
        }
        rows: list[dict[str, Any]] = []
        entry["plans"] = rows
        for first, growth, largest, context, crossfade in plans:
            shape = Shape(first=first, growth=growth, largest=largest, context=context, crossfade=crossfade)
            row = {"first": first, "growth": growth, "largest": largest, "context": context, "crossfade": crossfade}
            row.update(measure_plan(engine, phonemes, style, reference, shape, text))
            rows.append(row)
            print(label, row, flush=True)
        entry["paced"] = {"pace": round(pace, 4),
                          **measure_plan(engine, phonemes, style, reference, Shape(), text, next_size=served)}
        print(label, "paced", entry["paced"], flush=True)
        entry["decoder_parts"] = vocoder_share(engine, phonemes, style)
        default = rows[0]
        entry["default_over_style_row"] = round(default["log_mel_db"] / entry["variation_style_row_db"], 2)
        result["sentences"][label] = entry
    if not args.quick:
        result["float_decoder"] = attribution(model, phonemizer, engine, list(result["sentences"]))
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    result["default"] = {k: getattr(Shape(), k) for k in ("first", "growth", "largest", "context", "crossfade")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
