"""Where a paragraph's time goes on the engine path, step by step (docs/throughput.md).

    .venv-kokoro/bin/python -m bench.profile_paragraph --model-dir DIR --out bench/results/profile-torch.json

The agent answer's first eight sentences (bench/throughput.py), medians of ``--rounds`` rounds:

* ``g2p_s``: the Phonemizer over each sentence (the server runs it in its own thread, ahead);
* per chunk: ``front_s`` (BERT, durations, alignment, F0, text encoder: ``Engine.begin`` less the
  harmonic source), ``source_once_s`` (the vocoder's harmonic source over the whole chunk, as
  both engines make it now) against, on the torch engine, ``source_per_window_s`` (one per window,
  as it did before), ``one_shot_decode_s`` (the decoder over the whole chunk);
* ``speech``: the server's Speech over the paragraph (deadline scheduler, windows cut by the cost
  a server fits to the windows it decodes, engine_sides.Sides): its windows (``window_frames``:
  each one's decoded frames), frames decoded against frames heard (context decoded twice), model
  time, the worker's idle time between jobs and the time from a job's end to the next job's start
  (scheduler hops), and the windows the chunks would have had without joining the rest;
* ``speech_model_over_chunks``: the speech's model time over the chunks' alone (front, source
  and one-shot decoding), per round, so the host's speed from one round to the next cancels out;
* ``encode_s``: encoding the paragraph's audio to mp3 and to pcm in 100 ms chunks (StreamEncoder);
* ``decoder_weight_norm_s`` (torch): what kokoro's weight-norm hooks add to every decoder call
  (``g * v / ||v||`` over the decoder's ``decoder_weight_norm_layers`` layers), as the loop's
  KModel pays it; the engine computes those weights once at load (torch_inference.fold_weight_norm);
* ``istft_complex_exp_s`` against ``istft_polar_s`` (torch): the vocoder's inverse STFT over the
  paragraph's first chunk, as kokoro's TorchSTFT builds its spectrum (``magnitude * exp(phase * 1j)``)
  and as the engine does (torch_inference.PolarSTFT: ``torch.polar``), by turns, median of 5 each;
* ``decode_by_frames``: one decoder call over the paragraph's first chunk cut to 20, 40, ... frames
  (seconds, alone), and ``decode_cost`` the cost pace.fit_cost fits to them: what a call costs
  whatever its frames, and per frame (sizing.Cost's overhead and pace).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from .engine_sides import Sides


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def alone(frames: int, cost: Any) -> list[Any]:
    """The windows the server's sizer gives a chunk of ``frames`` alone at ``cost`` (sizing.sizes_alone)."""
    from kokoro_server.engines.windows import Seams
    from kokoro_server.sizing import Sizer, sizes_alone

    spans, start = [], 0
    for size in sizes_alone(frames, Sizer(), cost):
        spans.append(Seams().window(start, size, frames))
        start += size
    return spans


def chunk_costs(sides: Sides) -> dict[str, Any]:
    """G2P, front, harmonic source (once and per window) and one-shot decoding per chunk."""
    from kokoro_server.model_dir import style_for
    from kokoro_server.sizing import Cost
    from voicestream.chunker import iter_sentences

    engine, pack = sides.engine, sides.model.voices[sides.voice]
    g2p_s, rows = 0.0, []
    for sentence in iter_sentences(sides.text):
        spent, chunks = _timed(partial(sides.phonemizer.phonemize, sentence, voice=sides.voice))
        g2p_s += spent
        for phonemes in chunks:
            style = style_for(pack, phonemes)
            begin_s, decoding = _timed(partial(engine.begin, phonemes, style, 1.0))
            spans = alone(decoding.frames, Cost(pace=sides.pace))
            row: dict[str, Any] = {"frames": decoding.frames, "begin_s": begin_s,
                                   "windows_alone": [w.hi - w.lo for w in spans]}
            row["one_shot_decode_s"], _ = _timed(partial(decoding.decode, 0, decoding.frames))
            row.update(_source_costs(engine.engine, phonemes, style, spans))  # its parts: the engine Counted wraps
            row["front_s"] = max(0.0, begin_s - row.get("source_once_s", 0.0))
            rows.append(row)
    return {"g2p_s": g2p_s, "chunks": rows}


def _source_costs(engine: Any, phonemes: str, style: Any, spans: list[Any]) -> dict[str, float]:
    """The harmonic source made once over the chunk, and on the torch engine once per window."""
    if engine.name == "onnx":
        return _onnx_source_cost(engine, phonemes, style)
    source = getattr(engine, "_source", None)
    if source is None:
        return {}
    import numpy as np
    import torch

    ref_s = torch.from_numpy(np.ascontiguousarray(style, dtype=np.float32)).reshape(1, -1)
    with torch.inference_mode():
        _, f0, _, _ = engine._front(phonemes, ref_s, 1.0)
        once, _ = _timed(partial(source.make, f0))
        per_window = sum(_timed(partial(source.make, f0[:, 2 * w.lo:2 * w.hi]))[0] for w in spans)
    return {"source_once_s": once, "source_per_window_s": per_window}


def _onnx_source_cost(engine: Any, phonemes: str, style: Any) -> dict[str, float]:
    """The onnx engine's source graph over the chunk (begin runs it once; it has no per-window form)."""
    from kokoro_server.engines.onnx_split import F0, SOURCE

    if engine._split is None:  # a graph that could not be cut runs whole: no parts to time
        return {}
    front = engine._run(engine._front, list(engine._split.front_outputs), engine._feeds(phonemes, style, 1.0))
    once, _ = _timed(partial(engine._run, engine._source, [SOURCE], {F0: front[1]}))
    return {"source_once_s": once}


async def _speech(sides: Sides) -> dict[str, Any]:
    from kokoro_server.engines.windows import FRAME_S
    from kokoro_server.scheduler import Scheduler
    from kokoro_server.speech import Speech
    from kokoro_server.synth import Synthesizer
    from voicestream.chunker import iter_sentences

    jobs: list[tuple[float, float]] = []

    class Timed(Scheduler):
        def submit(self, owner: Hashable, fn: Callable[[], Any], **options: Any) -> asyncio.Future[Any]:
            def run() -> Any:
                began = time.perf_counter()
                try:
                    return fn()
                finally:
                    jobs.append((began, time.perf_counter()))
            return super().submit(owner, run, **options)

    scheduler = Timed(workers=1)
    await scheduler.start()
    synth = Synthesizer(engine=sides.engine, voices=sides.model.voices, scheduler=scheduler,
                        default_voice=sides.voice)
    synth.phonemizer.phonemize("Warm up.", voice=sides.voice)
    synth.keep_up(sides.cost)  # the cost a server that has served a while fits (engine_sides.Sides)
    windows: list[dict[str, Any]] = []
    planned_frames = 0
    try:
        sides.engine.reset()  # count this speech's decoder calls alone (their own frames and context)
        began = time.perf_counter()
        async for chunk in Speech(synth, owner="p", pieces=iter_sentences(sides.text), voice=sides.voice, speed=1.0):
            windows.append({"audio_s": chunk.seconds, "model_s": chunk.synthesis_s})
            if chunk.frames:  # a chunk's first window: the windows it would have had alone, not joined
                planned_frames += sum(w.hi - w.lo for w in alone(chunk.frames, synth.cost))
        wall = time.perf_counter() - began
    finally:
        await scheduler.stop()
        synth.close()
    model_s = sum(end - start for start, end in jobs)
    hops = [b[0] - a[1] for a, b in zip(jobs, jobs[1:])]
    audio_s = sum(w["audio_s"] for w in windows)
    heard_frames = round(audio_s / FRAME_S)
    return {"wall_s": wall, "model_s": model_s, "jobs": len(jobs), "windows": len(windows), "audio_s": audio_s,
            "frames_heard": heard_frames, "frames_decoded": sides.engine.frames,
            "frames_planned_without_join": planned_frames,
            "between_jobs_s": sum(hops), "between_jobs_median_ms": 1000 * statistics.median(hops) if hops else 0.0,
            "window_model_s": [round(w["model_s"], 4) for w in windows], "window_frames": list(sides.engine.decoded)}


WINDOW_SIZES = (20, 40, 80, 120, 160, 240, 320, 480)  # pace.FIT_LEAST sizes at least


def decode_by_frames(sides: Sides) -> dict[str, Any]:
    """One decoder call over the first ``n`` frames of the paragraph as one chunk, per n (seconds)."""
    from kokoro_server.engines import MAX_PHONEMES
    from kokoro_server.model_dir import style_for
    from kokoro_server.pace import fit_cost

    phonemes = sides.phonemizer.phonemize(sides.text, voice=sides.voice)[0][:MAX_PHONEMES]
    decoding = sides.engine.begin(phonemes, style_for(sides.model.voices[sides.voice], phonemes), 1.0)
    seconds = {n: _timed(partial(decoding.decode, 0, n))[0] for n in WINDOW_SIZES if n <= decoding.frames}
    cost = fit_cost(list(seconds.items()))
    return {"decode_by_frames": {str(n): t for n, t in seconds.items()},
            "decode_cost": {"overhead_s": cost.overhead, "pace": cost.pace} if cost else {}}


def weight_norm_cost(sides: Sides) -> dict[str, Any]:
    """torch: the decoder's weight-norm hooks on one call of the loop's KModel (the engine has none)."""
    if sides.pipeline is None:
        return {}
    import torch
    from torch.nn.utils.weight_norm import WeightNorm

    hooks = [(module, hook) for module in sides.pipeline.model.decoder.modules()
             for hook in module._forward_pre_hooks.values() if isinstance(hook, WeightNorm)]
    with torch.inference_mode():
        seconds = _timed(lambda: [hook.compute_weight(module) for module, hook in hooks])[0]
    return {"decoder_weight_norm_s": seconds, "decoder_weight_norm_layers": len(hooks)}


def istft_cost(sides: Sides, frames: int) -> dict[str, Any]:
    """torch: the inverse STFT of ``frames`` frames' spectrum, kokoro's form against the engine's."""
    if sides.engine.name != "torch":
        return {}
    import torch
    from kokoro.istftnet import TorchSTFT

    from kokoro_server.engines.torch_inference import PolarSTFT
    from kokoro_server.engines.windows import FRAME_S
    from voicestream.protocol import NATIVE_SAMPLE_RATE

    config = sides.model.config["istftnet"]
    n_fft, hop = config["gen_istft_n_fft"], config["gen_istft_hop_size"]
    samples = frames * round(FRAME_S * NATIVE_SAMPLE_RATE)
    bins, steps = n_fft // 2 + 1, samples // hop + 1
    forms = {"istft_complex_exp_s": TorchSTFT(n_fft, hop, n_fft), "istft_polar_s": PolarSTFT(n_fft, hop, n_fft)}
    torch.manual_seed(0)  # what the generator feeds it: exp() and sin() of its last convolution
    magnitude, phase = torch.exp(torch.randn(1, bins, steps)), torch.sin(torch.randn(1, bins, steps))
    times: dict[str, list[float]] = {name: [] for name in forms}
    with torch.inference_mode():
        for _ in range(5):
            for name, form in forms.items():
                times[name].append(_timed(partial(form.inverse, magnitude, phase))[0])
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def encode_costs(seconds: float) -> dict[str, float]:
    import numpy as np

    from kokoro_server.audio import StreamEncoder

    audio = (0.1 * np.sin(np.arange(int(seconds * 24_000)) * 0.05)).astype(np.float32)
    out = {}
    for fmt in ("mp3", "pcm"):
        encoder = StreamEncoder(fmt=fmt)
        began = time.perf_counter()
        for start in range(0, audio.size, 2400):
            encoder.encode(audio[start:start + 2400])
        encoder.finish()
        out[f"encode_{fmt}_s"] = time.perf_counter() - began
        encoder.close()
    return out


def profile(sides: Sides) -> dict[str, Any]:
    costs = chunk_costs(sides)
    speech = asyncio.run(_speech(sides))
    chunks = costs["chunks"]
    total = {key: sum(c.get(key, 0.0) for c in chunks)
             for key in ("front_s", "source_once_s", "source_per_window_s", "one_shot_decode_s")
             if any(key in c for c in chunks)}  # no per-window source on the onnx engine
    frames = sum(c["frames"] for c in chunks)
    per_frame_s = total["one_shot_decode_s"] / frames
    alone_s = total["front_s"] + total.get("source_once_s", 0.0) + total["one_shot_decode_s"]
    return {"g2p_s": costs["g2p_s"], **total, "frames": frames, "chunks": len(chunks),
            "decode_per_frame_ms": 1000 * per_frame_s, "speech": speech,
            # paired within the round, as engine_vs_loop's ratios: the host's speed moves between rounds
            "speech_model_over_chunks": speech["model_s"] / alone_s,
            **encode_costs(speech["audio_s"]), **weight_norm_cost(sides), **decode_by_frames(sides),
            **istft_cost(sides, chunks[0]["frames"]),
            "per_chunk": chunks}


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per numeric key, the median over rounds (lists and nested rows from the last round)."""
    out: dict[str, Any] = {}
    for key, value in rounds[-1].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = round(statistics.median(r[key] for r in rounds), 4)
        elif isinstance(value, dict):
            out[key] = median_of([r[key] for r in rounds])
        else:
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.profile_paragraph", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    worker = ThreadPoolExecutor(1)  # as bench/throughput.py: torch off the main thread
    sides = worker.submit(Sides, args.model_dir).result()
    rounds = [worker.submit(profile, sides).result() for _ in range(args.rounds)]
    worker.shutdown()
    result = {"command": f"python -m bench.profile_paragraph --model-dir {args.model_dir.name} --rounds {args.rounds}",
              "engine": sides.engine.name, "voice": sides.voice, "decoder_pace": round(sides.pace, 4),
              "rounds": args.rounds, **median_of(rounds)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("per_chunk", "speech")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
