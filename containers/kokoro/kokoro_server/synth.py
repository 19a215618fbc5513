"""Text to audio chunks: sentences, G2P and model jobs pipelined ahead of whoever reads the audio.

Both routes use it. ``POST /invocations`` reads one :class:`Speech` over the sentences it cut from
its text; a WebSocket session reads one per utterance (one piece, already cut: by the client for
``speak``, by the session's chunker for ``delta``) and starts the next one's G2P and jobs while the
previous one's audio streams, so the model never waits on G2P between sentences. Nothing here cuts
sentences: each text is cut once, before it gets here (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Hashable

import numpy as np
from voicestream.protocol import ProtocolError

from .engines import Engine, Synthesis
from .g2p import Phonemizer, sentence_jobs
from .model_dir import style_for
from .scheduler import FairScheduler

# How many chunks of one speech may sit finished or queued ahead of its reader. Two keeps the
# model busy across sentence boundaries while bounding the audio held for a slow reader.
LOOKAHEAD = 2


@dataclass(frozen=True, kw_only=True)
class TimedSynthesis:
    """A chunk's audio and how long the model spent on it."""

    synthesis: Synthesis
    synthesis_s: float


class Synthesizer:
    """Everything a route needs to turn text into audio: voices, G2P, the fair model queue."""

    def __init__(
        self, *, engine: Engine, voices: dict[str, np.ndarray], scheduler: FairScheduler,
        default_voice: str | None = None,
    ) -> None:
        self.engine = engine
        self.voices = voices
        self.scheduler = scheduler
        self.phonemizer = Phonemizer()
        self.default_voice = default_voice if default_voice in voices else _pick_default(voices)
        # G2P runs in its own thread, beside the model's, so one overlaps the other.
        self._g2p = ThreadPoolExecutor(1, thread_name_prefix="kokoro-g2p")

    def resolve_voice(self, voice: str | None) -> str:
        if voice is None:
            return self.default_voice
        if voice not in self.voices:
            known = ", ".join(sorted(self.voices))
            raise ProtocolError("unknown_voice", f"voice: unknown voice {voice!r}; available: {known}", field="voice")
        return voice

    async def phonemize(self, text: str, *, voice: str) -> list[str]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._g2p, lambda: self.phonemizer.phonemize(text, voice=voice))

    def submit(self, *, owner: Hashable, phonemes: str, voice: str, speed: float) -> asyncio.Future[TimedSynthesis]:
        style = style_for(self.voices[voice], phonemes)

        def run() -> TimedSynthesis:
            started = time.perf_counter()
            result = self.engine.synthesize(phonemes, style, speed)
            return TimedSynthesis(synthesis=result, synthesis_s=time.perf_counter() - started)

        return self.scheduler.submit(owner, run)

    def speech(
        self, *, owner: Hashable, pieces: Iterable[str], voice: str, speed: float, after: "Speech | None" = None
    ) -> "Speech":
        """Speak ``pieces`` (sentences already cut; an iterator is read as the producer needs it)."""
        return Speech(self, owner=owner, pieces=pieces, voice=voice, speed=speed, after=after)

    def warm_up(self) -> None:
        """Run G2P and one synthesis now, so the first request pays neither."""
        phonemes = self.phonemizer.phonemize("Hello, world.", voice=self.default_voice)
        for chunk in phonemes:
            self.engine.synthesize(chunk, style_for(self.voices[self.default_voice], chunk), 1.0)

    def close(self) -> None:
        """Drop queued G2P and wait for the one running: spaCy's pipeline is never used by two
        threads, nor torn down under one."""
        self._g2p.shutdown(wait=True, cancel_futures=True)


def _pick_default(voices: dict[str, np.ndarray]) -> str:
    return "af_heart" if "af_heart" in voices else sorted(voices)[0]


class Speech:
    """Pieces of text on their way to audio. Iterate it for chunks in order; ``cancel`` drops the rest.

    A producer task phonemizes the pieces (G2P splits only what exceeds the model's 510 phonemes) and queues model jobs, at most
    LOOKAHEAD chunks ahead of the reader. With ``after`` it waits until the previous speech has
    queued all its jobs, so one owner's jobs reach the model in the order they were spoken.
    """

    def __init__(
        self, synth: Synthesizer, *, owner: Hashable, pieces: Iterable[str], voice: str, speed: float,
        after: "Speech | None",
    ) -> None:
        self._synth = synth
        self._owner = owner
        self._pieces = pieces
        self._voice = voice
        self._speed = speed
        self._after = after
        self._jobs: asyncio.Queue[asyncio.Future[TimedSynthesis] | None] = asyncio.Queue(LOOKAHEAD)
        self._pending: list[asyncio.Future[TimedSynthesis]] = []
        self.all_queued = asyncio.Event()
        self.error: BaseException | None = None
        self._producer = asyncio.create_task(self._produce())

    async def _produce(self) -> None:
        try:
            if self._after is not None:
                await self._after.all_queued.wait()
                self._after = None  # no chain of every earlier speech kept alive by the latest one
            for piece in self._pieces:
                for chunk in await self._synth.phonemize(piece, voice=self._voice):
                    for phonemes in sentence_jobs(chunk):
                        future = self._synth.submit(
                            owner=self._owner, phonemes=phonemes, voice=self._voice, speed=self._speed
                        )
                        self._pending.append(future)
                        await self._jobs.put(future)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # G2P failed: the reader raises it after what was queued
            self.error = exc
        finally:
            self.all_queued.set()
        await self._jobs.put(None)

    async def __aiter__(self) -> AsyncIterator[TimedSynthesis]:
        while True:
            future = await self._jobs.get()
            if future is None:
                if self.error is not None:
                    raise self.error
                return
            try:
                yield await future
            finally:
                if future in self._pending:
                    self._pending.remove(future)

    def cancel(self) -> None:
        self._producer.cancel()
        self._after = None
        self.all_queued.set()
        for future in self._pending:
            future.cancel()
        self._pending.clear()
