"""Throughput: a long paragraph sent as one message, ours against a plain one-shot loop.

    .venv-kokoro/bin/python -m bench.throughput --model-dir DIR [--sentences 8]

Runs in the Kokoro environment, in one process, so both sides pay the same G2P and model:

* ``loop``: what a script would do, sentence after sentence: G2P, then the engine in one shot (for
  a torch model directory also kokoro's own ``KPipeline`` over each sentence, ``kpipeline``);
* ``ours_windowed`` / ``ours_one_shot``: the server's Speech (G2P in its own thread, pipelined
  ahead of the model, deadline scheduler) over the same text, from the first job to the last audio;
  ``ours_windowed_per_chunk`` starts every sentence's windows small (the bench's
  ``windowed_per_chunk`` variant, bench/variants.py) instead of growing them with the audio before,
  to show what that buys.

Every side runs in the same worker thread: on this machine torch on the main thread ran the tiny
model ~20x slower than in a worker thread (23 s against 1 s for one sentence, load average ~10),
which would otherwise be counted against the loops. Prints one JSON object: the fastest of
``--repeats`` runs per side (in rotated order, so no side always pays first-run costs) and audio
seconds. Windowed decoding decodes its context frames twice (about a quarter more decoder work on a
long sentence); the pipelining wins some back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .scenario import ANSWER_PARAGRAPHS

if TYPE_CHECKING:
    import numpy as np

    from kokoro_server.engines import Engine
    from kokoro_server.model_dir import ModelDir

VOICE_PREFERENCE = ("af_heart", "jf_alpha")


def paragraph(sentences: int) -> str:
    """The agent answer's first ``sentences`` sentences, as one paragraph."""
    from voicestream.chunker import iter_sentences

    pieces = [s for p in ANSWER_PARAGRAPHS for s in iter_sentences(p)]
    return " ".join(pieces[:sentences])


async def ours(engine: Engine, voices: dict[str, np.ndarray], voice: str, text: str, *, windowed: bool, pace: float,
               per_chunk: bool = False) -> tuple[float, float]:
    from kokoro_server.scheduler import Scheduler
    from kokoro_server.sizing import Cost
    from kokoro_server.speech import Speech
    from kokoro_server.synth import Synthesizer
    from voicestream.chunker import iter_sentences

    from .variants import strategies

    scheduler = Scheduler(workers=1)
    await scheduler.start()
    variants = ("windowed_per_chunk",) if per_chunk else () if windowed else ("one_shot",)
    synth = Synthesizer(engine=engine, voices=voices, scheduler=scheduler, default_voice=voice,
                        sizer=strategies(variants).sizer)
    synth.phonemizer.phonemize("Warm up.", voice=voice)
    synth.keep_up(Cost(pace=pace))  # as the server sizes windows from warm-up (KOKORO_DECODER_PACE=measure)
    try:
        began = time.perf_counter()
        speech = Speech(synth, owner="bench", pieces=iter_sentences(text), voice=voice, speed=1.0)
        audio = sum([c.seconds async for c in speech])
        return time.perf_counter() - began, audio
    finally:
        await scheduler.stop()
        synth.close()


def loop(engine: Engine, voices: dict[str, np.ndarray], voice: str, text: str) -> tuple[float, float]:
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import style_for
    from voicestream.chunker import iter_sentences

    phonemizer = Phonemizer()
    phonemizer.phonemize("Warm up.", voice=voice)
    began = time.perf_counter()
    audio = 0.0
    for sentence in iter_sentences(text):
        for chunk in phonemizer.phonemize(sentence, voice=voice):
            audio += engine.synthesize(chunk, style_for(voices[voice], chunk), 1.0).seconds
    return time.perf_counter() - began, audio


def kpipeline(model: ModelDir, voice: str, text: str) -> tuple[float, float]:
    import torch
    from kokoro import KPipeline

    from kokoro_server.engines.torch_engine import build_kmodel, load_checkpoint_strictly
    from voicestream.chunker import iter_sentences

    kmodel = build_kmodel(model.config)
    load_checkpoint_strictly(kmodel, model.weights)
    pipeline = KPipeline(lang_code="a", repo_id="hexgrad/Kokoro-82M", model=kmodel.eval())
    pack = torch.from_numpy(model.voices[voice]).float()
    list(pipeline("Warm up.", voice=pack))
    began = time.perf_counter()
    samples = sum(len(r.audio) for sentence in iter_sentences(text)
                  for r in pipeline(sentence, voice=pack, split_pattern=None) if r.audio is not None)
    return time.perf_counter() - began, samples / 24_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="runs per side (rotated order); the fastest counts")
    args = parser.parse_args(argv)
    from kokoro_server.engines import load_engine
    from kokoro_server.model_dir import open_model_dir

    model = open_model_dir(args.model_dir)
    engine = load_engine(model)
    voice = next((v for v in VOICE_PREFERENCE if v in model.voices), sorted(model.voices)[0])
    text = paragraph(args.sentences)
    engine.synthesize("hˈɛlO", model.voices[voice][4], 1.0)  # warm the engine
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.pace import warm_up_pace

    pace = warm_up_pace(engine, Phonemizer(), voice=voice, pack=model.voices[voice])  # once, as the server
    result: dict[str, Any] = {"engine": engine.name, "sentences": args.sentences, "chars": len(text),
                              "pace": round(pace, 4)}
    sides = (
        ("loop", lambda: loop(engine, model.voices, voice, text)),
        ("ours_windowed", lambda: asyncio.run(ours(engine, model.voices, voice, text, windowed=True, pace=pace))),
        ("ours_one_shot", lambda: asyncio.run(ours(engine, model.voices, voice, text, windowed=False, pace=pace))),
        ("ours_windowed_per_chunk",
         lambda: asyncio.run(ours(engine, model.voices, voice, text, windowed=True, pace=pace, per_chunk=True))),
        *((("kpipeline", lambda: kpipeline(model, voice, text)),) if engine.name == "torch" else ()),
    )
    times: dict[str, list[float]] = {name: [] for name, _ in sides}
    worker = ThreadPoolExecutor(1)  # every side off the main thread, as the server's model runs
    for rep in range(args.repeats):  # rotated, so no side always pays the first-run costs
        for name, run in sides[rep % len(sides):] + sides[:rep % len(sides)]:
            seconds, audio = worker.submit(run).result()
            times[name].append(seconds)
            result[name] = {"s": round(min(times[name]), 3), "audio_s": round(audio, 2), "runs": len(times[name])}
    worker.shutdown()
    baseline = result.get("kpipeline", result["loop"])["s"]
    result["ours_windowed_over_baseline"] = round(result["ours_windowed"]["s"] / baseline, 3)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
