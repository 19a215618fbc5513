"""Our framework plugins against the frameworks' OpenAI route, on one server and one streamed answer.

    .venv/bin/python -m bench.frameworks [--rounds 5] [--token-ms 40] [--model-dir DIR]
        [--kokoro-python .venv-kokoro/bin/python] [--out bench/results/frameworks.json]

One Kokoro server (the tiny random-weight model unless ``--model-dir`` names a real one: the JSON
says which) serves four variants, interleaved (the order rotates every round), after one unmeasured
warm-up answer each:

- ``livekit_kokoro``: voicestream.integrations.livekit.KokoroTTS ``stream()`` (bidi WebSocket).
- ``livekit_openai_adapter``: LiveKit's ``openai.TTS(base_url=.../v1, response_format="pcm")``
  behind ``tts.StreamAdapter`` (LiveKit's sentence tokenizer, one HTTP request per sentence).
- ``pipecat_kokoro``: voicestream.integrations.pipecat.KokoroTTSService in a pipecat pipeline.
- ``pipecat_openai``: pipecat's ``OpenAITTSService(base_url=.../v1)``, voice ``alloy`` (it refuses
  Kokoro's names; the server speaks ``alloy`` with its default voice when it has no ``af_alloy``).

The same answer is streamed into each as an LLM streams it: a word-token every ``--token-ms``.
Time to first audio: from the first token to the first audio frame the framework hands on; total:
from the first token to the last audio frame. Medians over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from voicestream.launch import KokoroProcess, build_tiny_model

REPO = Path(__file__).resolve().parent.parent
# An answer as a chat LLM writes one: its first sentence has a clause break after five words, where
# the project's chunker may start speaking (an answer opening "Sure, ..." gives it no such break).
ANSWER = ("A weekend at the coast sounds like a great plan, and the weather looks dry on Saturday. "
          "Pack a warm jacket for the evening. The drive takes about three hours each way, "
          "so leave early to miss the traffic near the bridge. Have a great time!")


def tokens(text: str) -> Iterator[str]:
    words = text.split(" ")
    yield words[0]
    for word in words[1:]:
        yield " " + word


async def paced(token_s: float, send: Callable[[str], Awaitable[None]]) -> None:
    """Send the answer's tokens on an LLM's schedule (absolute, so the pace does not drift)."""
    start = time.perf_counter()
    for i, token in enumerate(tokens(ANSWER)):
        delay = start + i * token_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await send(token)


class Sample:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.first: float | None = None
        self.last = 0.0
        self.audio_s = 0.0

    def audio(self, seconds: float) -> None:
        t = time.perf_counter() - self.t0
        if self.first is None:
            self.first = t
        self.last = t
        self.audio_s += seconds

    def result(self) -> dict[str, float]:
        if self.first is None:
            raise RuntimeError("no audio came back")
        return {"ttfa_ms": round(self.first * 1000, 1), "total_ms": round(self.last * 1000, 1),
                "audio_s": round(self.audio_s, 3)}


# ---- LiveKit --------------------------------------------------------------------------------


async def livekit_answer(engine: Any, token_s: float) -> dict[str, float]:
    stream = engine.stream()
    sample = Sample()

    async def push(token: str) -> None:
        stream.push_text(token)

    async def feed() -> None:
        await paced(token_s, push)
        stream.end_input()

    feeder = asyncio.create_task(feed())
    try:
        async for ev in stream:
            sample.audio(ev.frame.duration)
        await feeder
    finally:
        await stream.aclose()
    return sample.result()


# ---- pipecat --------------------------------------------------------------------------------


async def pipecat_answer(make_service: Callable[[], Any], token_s: float) -> dict[str, float]:
    from pipecat.frames.frames import (
        Frame,
        LLMFullResponseEndFrame,
        LLMFullResponseStartFrame,
        LLMTextFrame,
        TTSAudioRawFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.workers.runner import WorkerRunner

    holder: dict[str, Sample] = {}
    done = asyncio.Event()

    class Sink(FrameProcessor):
        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame) and "s" in holder:
                holder["s"].audio(len(frame.audio) / (2 * frame.sample_rate))
            elif isinstance(frame, LLMFullResponseEndFrame):
                done.set()  # queued behind the answer's audio
            await self.push_frame(frame, direction)

    worker = PipelineWorker(Pipeline([make_service(), Sink()]), cancel_on_idle_timeout=False,
                            params=PipelineParams(audio_out_sample_rate=24000))
    started = asyncio.Event()

    async def _started(worker: Any, frame: Any) -> None:
        started.set()

    worker.add_event_handler("on_pipeline_started", _started)  # what @worker.event_handler does, typed

    async def push(token: str) -> None:
        await worker.queue_frame(LLMTextFrame(token))

    async def drive() -> None:
        try:
            await asyncio.wait_for(started.wait(), 30)
            holder["s"] = Sample()
            await worker.queue_frame(LLMFullResponseStartFrame())
            await paced(token_s, push)
            await worker.queue_frame(LLMFullResponseEndFrame())
            await asyncio.wait_for(done.wait(), 120)
        finally:
            await worker.stop_when_done()  # type: ignore[no-untyped-call]  # pipecat leaves it unannotated

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), drive())
    return holder["s"].result()


# ---- the run --------------------------------------------------------------------------------


async def bench(url: str, rounds: int, token_s: float) -> dict[str, dict[str, Any]]:
    from livekit.agents import tts as lk_tts
    from livekit.plugins import openai as lk_openai
    from pipecat.services.openai.tts import OpenAITTSService

    from voicestream.integrations.livekit import KokoroTTS
    from voicestream.integrations.pipecat import KokoroTTSService

    ours_lk = KokoroTTS(url=url)
    openai_lk = lk_tts.StreamAdapter(tts=lk_openai.TTS(base_url=f"{url}/v1", api_key="unused", voice="alloy",
                                                       response_format="pcm"))
    variants: dict[str, Callable[[], Awaitable[dict[str, float]]]] = {
        "livekit_kokoro": lambda: livekit_answer(ours_lk, token_s),
        "livekit_openai_adapter": lambda: livekit_answer(openai_lk, token_s),
        "pipecat_kokoro": lambda: pipecat_answer(lambda: KokoroTTSService(url=url), token_s),
        "pipecat_openai": lambda: pipecat_answer(
            lambda: OpenAITTSService(api_key="unused", base_url=f"{url}/v1",
                                     settings=OpenAITTSService.Settings(voice="alloy")), token_s),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    names = list(variants)
    for name in names:  # warm-up, not counted
        await variants[name]()
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            runs[name].append(await variants[name]())
            print(f"round {r + 1} {name}: {runs[name][-1]}", flush=True)
    await ours_lk.aclose()
    await openai_lk.aclose()
    return {name: {"runs": got,
                   "ttfa_p50_ms": round(statistics.median(s["ttfa_ms"] for s in got), 1),
                   "total_p50_ms": round(statistics.median(s["total_ms"] for s in got), 1),
                   "audio_s_p50": round(statistics.median(s["audio_s"] for s in got), 3)}
            for name, got in runs.items()}


def markdown(result: dict[str, Any]) -> str:
    v = result["variants"]
    lines = [
        "# Framework plugins vs the frameworks' OpenAI route",
        "",
        f"Server: {result['server']['model']}, CPU. One answer of {result['answer_words']} words streamed a "
        f"word-token every {result['token_ms']} ms (the LLM alone takes {result['llm_s']:.2f} s); "
        f"{result['rounds']} interleaved rounds after a warm-up; medians. Load average (1, 5, 15 min) before "
        f"{result['loadavg_before']}, after {result['loadavg']} on {os.cpu_count()} CPUs shared with other work. "
        "`python -m bench.frameworks` (bench/frameworks.py) writes this.",
        "",
        "| framework | variant | first audio (ms) | its range | last audio (ms) | its range | audio (s) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    labels = {"livekit_kokoro": ("LiveKit 1.8.9", "voicestream KokoroTTS (bidi stream)"),
              "livekit_openai_adapter": ("LiveKit 1.8.9", "openai.TTS + StreamAdapter"),
              "pipecat_kokoro": ("pipecat 1.14", "voicestream KokoroTTSService (bidi stream)"),
              "pipecat_openai": ("pipecat 1.14", "OpenAITTSService")}
    for name, (fw, label) in labels.items():
        s = v[name]
        ttfa = [r["ttfa_ms"] for r in s["runs"]]
        total = [r["total_ms"] for r in s["runs"]]
        lines.append(f"| {fw} | {label} | {s['ttfa_p50_ms']:.0f} | {min(ttfa):.0f}-{max(ttfa):.0f} "
                     f"| {s['total_p50_ms']:.0f} | {min(total):.0f}-{max(total):.0f} | {s['audio_s_p50']:.2f} |")
    lines.append("")
    for fw, ours, theirs in (("LiveKit", "livekit_kokoro", "livekit_openai_adapter"),
                             ("pipecat", "pipecat_kokoro", "pipecat_openai")):
        pairs = list(zip(v[ours]["runs"], v[theirs]["runs"]))  # the same round: the same load
        for key, what in (("ttfa_ms", "first audio"), ("total_ms", "last audio")):
            d = [a[key] - b[key] for a, b in pairs]
            lines.append(f"- {fw}, {what}, ours minus the OpenAI route paired by round: median "
                         f"{statistics.median(d):+.0f} ms, ours earlier in {sum(x < 0 for x in d)} of {len(d)}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--token-ms", type=float, default=40.0)
    parser.add_argument("--model-dir", type=Path, help="a real model directory (default: the tiny model, built here)")
    parser.add_argument("--kokoro-python", type=Path, default=REPO / ".venv-kokoro" / "bin" / "python")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "frameworks.json")
    parser.add_argument("--report", action="store_true", help="only rewrite the .md from the JSON in --out")
    args = parser.parse_args()
    if args.report:
        args.out.with_suffix(".md").write_text(markdown(json.loads(args.out.read_text())))
        return
    before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="bench-frameworks-") as tmp:
        model_dir = args.model_dir or build_tiny_model(Path(tmp) / "model", python=args.kokoro_python)
        server = KokoroProcess(model_dir=model_dir, python=args.kokoro_python, log_path=Path(tmp) / "server.log",
                               env={"KOKORO_DEVICE": "cpu"})
        server.start()
        try:
            variants = asyncio.run(bench(server.url, args.rounds, args.token_ms / 1000))
        finally:
            server.stop()
    n = len(ANSWER.split(" "))
    result = {
        "server": {"model": f"real weights ({args.model_dir})" if args.model_dir else "tiny random-weight model",
                   "device": "cpu"},
        "answer_words": n, "token_ms": args.token_ms, "llm_s": round((n - 1) * args.token_ms / 1000, 3),
        "rounds": args.rounds, "loadavg_before": before, "loadavg": [round(x, 2) for x in os.getloadavg()],
        "variants": variants,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
