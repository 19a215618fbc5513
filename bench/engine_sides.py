"""The sides bench.engine_vs_loop compares, on one engine and voice: our engine path (Speech over
the scheduler and the job sizer, its decoder calls counted) and the plain loops over the same text
(kokoro's own KPipeline on torch, the Phonemizer and one-shot decoding on onnx). Each side times
itself (:class:`Run`); bench.engine_vs_loop interleaves them and bench.profile_paragraph reuses
them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .throughput import VOICE_PREFERENCE, paragraph

if TYPE_CHECKING:
    import numpy as np

    from kokoro_server.engines import Decoding, Engine, Synthesis
    from kokoro_server.engines.halt import Halt
    from kokoro_server.sizing import Cost

#: paragraphs spoken at once: the "four at once" rows, and what the decoder's cost is fitted to
CONCURRENT = 4


class Run:
    """One side's timings: first audio and last audio (seconds from its start), CPU, audio."""

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self.cpu = time.process_time()
        self.first_s: float | None = None
        self.audio_s = 0.0

    def audio(self, seconds: float) -> None:
        if self.first_s is None:
            self.first_s = time.perf_counter() - self.began
        self.audio_s += seconds

    def done(self) -> dict[str, float]:
        return {"first_s": self.first_s or 0.0, "total_s": time.perf_counter() - self.began,
                "cpu_s": time.process_time() - self.cpu, "audio_s": self.audio_s}


class Counted:
    """An engine that records what each decoder call decodes (own frames and context): windows cost
    their context twice, and under load the sizer may cut many (``decoded_per_heard``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine  # the one counted: what a profile times part by part
        self.name, self.device = engine.name, engine.device
        self.decoded: list[int] = []  # frames of each decoder call since the last reset, in order

    @property
    def frames(self) -> int:
        return sum(self.decoded)

    @property
    def calls(self) -> int:
        return len(self.decoded)

    def reset(self) -> None:
        self.decoded = []

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
        from kokoro_server.engines.windows import FEATURE_CONTEXT

        decoding = self.engine.begin(phonemes, style, speed, halt=halt)
        decode = decoding.decode

        def counted(lo: int, hi: int, halt: Halt | None = None, *, reach: int = FEATURE_CONTEXT) -> np.ndarray:
            self.decoded.append(hi - lo)
            return decode(lo, hi, halt, reach=reach)

        decoding.decode = counted
        return decoding

    def synthesize(self, phonemes: str, style: np.ndarray, speed: float) -> Synthesis:
        from kokoro_server.engines import Synthesis

        decoding = self.begin(phonemes, style, speed)
        return Synthesis(audio=decoding.rest(), durations=decoding.durations)


class Sides:
    """Everything measured, on one engine and voice."""

    def __init__(self, model_dir: Path, *, engine: Engine | None = None, workers: int = 1) -> None:
        """``engine``: the one to measure (by default the server's, loaded from ``model_dir``);
        ``workers``: model jobs ours runs at once (the server runs one: scheduler.py)."""
        from kokoro_server.engines import load_engine
        from kokoro_server.g2p import Phonemizer
        from kokoro_server.model_dir import open_model_dir
        from kokoro_server.pace import warm_up_pace

        self.model = open_model_dir(model_dir)
        self.workers = workers
        self.engine = Counted(engine or load_engine(self.model))
        self.voice = next((v for v in VOICE_PREFERENCE if v in self.model.voices), sorted(self.model.voices)[0])
        self.text = paragraph(8)
        self.phonemizer = Phonemizer()
        self.phonemizer.phonemize("Warm up.", voice=self.voice)
        self.pace = warm_up_pace(self.engine, self.phonemizer, voice=self.voice, pack=self.model.voices[self.voice])
        self.pipeline = self._kpipeline() if self.engine.name == "torch" else None
        self.cost = self._learned_cost()

    def _kpipeline(self) -> Any:
        import torch
        from kokoro import KPipeline

        from kokoro_server.engines.torch_engine import build_kmodel, load_checkpoint_strictly

        kmodel = build_kmodel(self.model.config)
        load_checkpoint_strictly(kmodel, self.model.weights)
        kmodel = kmodel.to(self.engine.device).eval()  # the loop runs where the engine does
        pipeline = KPipeline(lang_code="a", repo_id="hexgrad/Kokoro-82M", model=kmodel)
        self.pack = torch.from_numpy(self.model.voices[self.voice]).float()
        list(pipeline("Warm up.", voice=self.pack))
        return pipeline

    # ---- the loops --------------------------------------------------------------------------------

    def _loop_audio(self, text: str) -> Iterator[float]:
        """Seconds of audio per model call over ``text`` taken as one chunk."""
        if self.pipeline is not None:
            for result in self.pipeline(text, voice=self.pack, split_pattern=None):
                if result.audio is not None:
                    yield len(result.audio) / 24_000
            return
        from kokoro_server.model_dir import style_for

        pack = self.model.voices[self.voice]
        for chunk in self.phonemizer.phonemize(text, voice=self.voice):
            yield self.engine.synthesize(chunk, style_for(pack, chunk), 1.0).seconds

    def loop_sentence(self, text: str | None = None) -> dict[str, float]:
        from voicestream.chunker import iter_sentences

        run = Run()
        for sentence in iter_sentences(text or self.text):
            for seconds in self._loop_audio(sentence):
                run.audio(seconds)
        return run.done()

    def loop_chunk(self, text: str | None = None) -> dict[str, float]:
        run = Run()
        for seconds in self._loop_audio(text or self.text):
            run.audio(seconds)
        return run.done()

    # ---- ours -------------------------------------------------------------------------------------

    def _learned_cost(self) -> Cost:
        """The decoder cost a server fits to the windows it decodes (pace.PaceMeter), starting from
        the warm-up pace: fitted here to four paragraphs at once, as a server that has served a while."""
        texts = [self.text] * CONCURRENT
        cost: Cost = asyncio.run(self._ours(texts, [0.0] * CONCURRENT, (), linear_pace=True, learn=True))["cost"]
        return cost

    def ours(
        self, texts: list[str], *, starts: list[float] | None = None, variants: tuple[str, ...] = (),
        linear_pace: bool = False,
    ) -> dict[str, Any]:
        """Speak each of ``texts`` as its own owner, started ``starts`` seconds in; each owner's
        first audio from its own start, and the wall time to the last audio of all.
        ``variants``: bench/variants.py's decoding variants to speak with instead of the server's.
        ``linear_pace``: windows cut by the warm-up pace alone, not the fitted cost (``self.cost``)."""
        return asyncio.run(self._ours(texts, starts or [0.0] * len(texts), variants, linear_pace=linear_pace))

    async def _ours(
        self, texts: list[str], starts: list[float], variants: tuple[str, ...], *, linear_pace: bool,
        learn: bool = False,
    ) -> dict[str, Any]:
        from kokoro_server.engines.windows import FRAME_S
        from kokoro_server.scheduler import Scheduler
        from kokoro_server.sizing import Cost
        from kokoro_server.speech import Speech
        from kokoro_server.synth import Synthesizer
        from voicestream.chunker import iter_sentences

        from .variants import strategies

        chosen = strategies(variants)
        scheduler = Scheduler(workers=self.workers)
        await scheduler.start()
        synth = (chosen.synthesizer or Synthesizer)(
            engine=self.engine, voices=self.model.voices, scheduler=scheduler, default_voice=self.voice,
            sizer=chosen.sizer)
        synth.phonemizer.phonemize("Warm up.", voice=self.voice)
        synth.keep_up(Cost(pace=self.pace) if linear_pace else self.cost, remeasure=learn)

        async def speak(owner: int, text: str, start: float) -> dict[str, float]:
            await asyncio.sleep(start)
            run = Run()
            async for chunk in Speech(synth, owner=owner, pieces=iter_sentences(text), voice=self.voice, speed=1.0):
                run.audio(chunk.seconds)
            return run.done()

        try:
            whole = Run()
            self.engine.reset()
            found = await asyncio.gather(*(speak(i, t, s) for i, (t, s) in enumerate(zip(texts, starts))))
            total = whole.done()
        finally:
            await scheduler.stop()
            synth.close()
        heard = sum(c["audio_s"] for c in found) / FRAME_S
        return {"callers": found, **total, "decoded_per_heard": self.engine.frames / heard if heard else 0.0,
                "decoder_calls": self.engine.calls, **({"cost": synth.pace.current} if learn else {})}

    def ours_paragraph(self, variants: tuple[str, ...] = (), *, linear_pace: bool = False) -> dict[str, float]:
        result = self.ours([self.text], variants=variants, linear_pace=linear_pace)
        return {**result["callers"][0], **{key: result[key] for key in ("cpu_s", "decoded_per_heard", "decoder_calls")}}
