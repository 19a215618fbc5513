"""Text to audio chunks: sentences, G2P and model jobs pipelined ahead of whoever reads the audio.

Both routes use it. ``POST /invocations`` reads one :class:`Speech` over the sentences it cut from
its text; a WebSocket session reads one per utterance (one piece, already cut: by the client for
``speak``, by the session's chunker for ``delta``) and starts the next one's G2P and jobs while the
previous one's audio streams, so the model never waits on G2P between sentences. Nothing here cuts
sentences: each text is cut once, before it gets here (docs/architecture.md).

Each phoneme chunk is decoded in windows (engines/windows.py): the first job runs the engine's
front and the first window, each later job one more window, and every window's audio is a chunk
of the speech as soon as it exists. Windows are separate scheduler jobs, so other sessions' work
interleaves between them and a cancel drops the windows not yet decoded.

Windows grow with all the audio the speech made before them, across its chunks: a sentence that
follows enough audio is one window (up to WindowPlan.continued frames, continued_alone while no
other session's job waits), decoded exactly as in one shot, since its listener has that audio to
hear meanwhile. Only a speech's start pays for small windows (their context frames are decoded
twice). A speech that starts while its owner's earlier audio still plays (a session's next
utterance) starts from WindowPlan.carry frames instead of none. Once a chunk's listener has
enough audio queued to hear while the rest of the chunk is decoded at the decoder pace, the
windows left are decoded as one (``Synthesizer.ahead``): no more context decoded twice. The
windows depend on the text, whether it was carried, whether another session waited when a later
chunk was queued (two bits of timing), and with a decoder pace (WindowPlan.pace: set by
KOKORO_DECODER_PACE, or measured at warm-up and again when the engine is idle, PaceMeter) the pace
and the listener's queued audio; with KOKORO_DECODER_PACE=0, on the text and those two bits alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Hashable

import numpy as np

from voicestream.protocol import NATIVE_SAMPLE_RATE
from voicestream.protocol.normalization import NORMALIZE_ALL, Normalization

from .engines import Decoding, Engine, Synthesis, WindowPlan
from .engines.windows import FRAME_S, HEADROOM
from .g2p import G2PNotes, PhonemeChunk, Phonemizer, chunk_jobs
from .model_dir import style_for
from .pace import WARM_UP_TEXT, PaceMeter, warm_up_pace
from .scheduler import Scheduler
from .voices import VoiceBook
from .words import PlacedWord, TextAligner, WordTiming, word_timings

# How many chunks (windows) of one speech may sit finished or queued ahead of its reader. A few
# keep the model busy across window and sentence boundaries while bounding what a slow reader holds.
LOOKAHEAD = 3


@dataclass(frozen=True, kw_only=True)
class TimedSynthesis:
    """A window's audio and how long the model spent on it. ``synthesis.durations`` (frames per
    token of the whole phoneme chunk) and ``words`` (the chunk's word times, ms from the start of
    the chunk as the model returns them; from the start of the speech as :class:`Speech` yields
    them) are set on a chunk's first window only."""

    synthesis: Synthesis
    synthesis_s: float
    decoding: Decoding | None = None  # the chunk's decoder state, while windows remain
    words: tuple[WordTiming, ...] = ()
    frames: int = 0  # the whole chunk's frames, on its first window (Speech counts them)

    @property
    def seconds(self) -> float:
        return self.synthesis.seconds


def _audio_s(result: TimedSynthesis) -> float:
    return result.synthesis.seconds


class Synthesizer:
    """Everything a route needs to turn text into audio: voices, G2P, the fair model queue."""

    def __init__(
        self, *, engine: Engine, voices: dict[str, np.ndarray], scheduler: Scheduler,
        default_voice: str | None = None, windowed: bool = True, plan: WindowPlan | None = None,
        vocab: Mapping[str, int] | None = None,
    ) -> None:
        """``windowed=False``: every chunk in one shot (bench/variants.py compares it)."""
        self.engine = engine
        self.pace = PaceMeter()
        self.plan = (plan or WindowPlan()) if windowed and getattr(engine, "windowed", False) else None
        self.voices = voices
        self.voice_book = VoiceBook(packs=voices)
        self.vocab = vocab  # the model's phoneme ids: symbols outside it have no duration
        self.scheduler = scheduler
        self.phonemizer = Phonemizer()
        self.default_voice = default_voice if default_voice in voices else _pick_default(voices)
        # G2P runs in its own thread, beside the model's, so one overlaps the other.
        self._g2p = ThreadPoolExecutor(1, thread_name_prefix="kokoro-g2p")
        scheduler.on_idle(self._remeasure_pace)

    def resolve_voice(self, voice: str | None, *, field: str = "voice") -> str:
        """The voice (or blend, ``af_bella(2)+af_sky(1)``) to speak with; ProtocolError naming ``field``."""
        if voice is None:
            return self.default_voice
        return self.voice_book.resolve(voice, field=field)

    async def phonemize(
        self, text: str, *, voice: str, notes: G2PNotes | None = None, normalize: Normalization = NORMALIZE_ALL,
    ) -> list[PhonemeChunk]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._g2p, lambda: self.phonemizer.chunks(text, voice=voice, notes=notes, options=normalize))

    def submit(
        self, *, owner: Hashable, phonemes: str, voice: str, speed: float, words: tuple[PlacedWord, ...] = (),
        frames_before: int = 0, then: Callable[[TimedSynthesis], None] | None = None,
    ) -> asyncio.Future[TimedSynthesis]:
        """Queue a chunk's front and first window; ``result.decoding`` decodes the rest (``submit_step``).
        ``frames_before``: what the same speech made ahead of this chunk (windows grow with it).
        ``then``: the scheduler's completion hook (Scheduler.submit)."""
        style = style_for(self.voice_book.pack(voice), phonemes)
        follows = self.follows(frames_before)
        plan = self.plan
        if plan is not None and follows and not self.scheduler.shared(owner):
            plan = plan.alone()  # WindowPlan.continued_alone: no other listener waits behind this chunk

        def run() -> TimedSynthesis:
            started = time.perf_counter()
            decoding = self.engine.begin(phonemes, style, speed, plan=plan)
            if follows:
                decoding.follow(frames_before)
            audio = decoding.step()
            spent = time.perf_counter() - started
            timings = word_timings(words, phonemes=phonemes, durations=decoding.durations,
                                   samples=decoding.frames * decoding.samples_per_frame, vocab=self.vocab)
            return TimedSynthesis(
                synthesis=Synthesis(audio=audio, durations=decoding.durations),
                synthesis_s=spent, decoding=None if decoding.done else decoding, words=timings,
                frames=decoding.frames,
            )

        return self.scheduler.submit(owner, run, audio_s=_audio_s, then=then)

    def follows(self, frames_before: int) -> bool:
        """Whether a chunk's windows grow from the ``frames_before`` its speech made ahead of it."""
        return bool(frames_before)

    def carried_frames(self, owner: Hashable) -> int:
        """Frames a new speech of ``owner`` plans its windows from (WindowPlan.carry): the plan's
        ``carry`` while the owner's listener has at least that much audio queued, else 0."""
        plan = self.plan
        if plan is None:
            return 0
        return plan.carry if self.scheduler.queued_audio_s(owner) >= plan.carry * FRAME_S else 0

    def submit_step(
        self, *, owner: Hashable, decoding: Decoding, then: Callable[[TimedSynthesis], None] | None = None,
    ) -> asyncio.Future[TimedSynthesis]:
        """Queue the next window of a chunk whose first window is done; all the windows left as one
        when the owner's listener is far enough ahead (:meth:`ahead`)."""
        if self.ahead(owner, decoding):
            decoding.join_rest()

        def run() -> TimedSynthesis:
            started = time.perf_counter()
            audio = decoding.step()
            return TimedSynthesis(synthesis=Synthesis(audio=audio), synthesis_s=time.perf_counter() - started,
                                  decoding=None if decoding.done else decoding)

        return self.scheduler.submit(owner, run, audio_s=_audio_s, then=then)

    def ahead(self, owner: Hashable, decoding: Decoding) -> bool:
        """Whether ``owner``'s listener has enough audio queued to hear while the rest of
        ``decoding`` is decoded in one window: HEADROOM of it covers the rest and its context at
        the plan's pace. While another owner waits, a joined window is at most ``continued`` frames,
        as a chunk's first. Without a pace (KOKORO_DECODER_PACE=0) windows never join: the text
        alone decides them."""
        plan = self.plan
        if plan is None or not plan.pace or decoding.remaining <= 1:
            return False
        rest = decoding.rest_frames
        if rest > plan.largest or (rest > plan.continued and self.scheduler.shared(owner)):
            return False
        return rest * FRAME_S * plan.pace <= HEADROOM * self.scheduler.queued_audio_s(owner)

    def speech(
        self, *, owner: Hashable, pieces: Iterable[str], voice: str, speed: float, after: "Speech | None" = None,
        text: str | None = None, normalize: Normalization = NORMALIZE_ALL,
    ) -> "Speech":
        """Speak ``pieces`` (sentences already cut; an iterator is read as G2P reaches it).
        ``text``: what the pieces were cut from, for word offsets (None: the pieces, joined by spaces)."""
        return Speech(self, owner=owner, pieces=pieces, voice=voice, speed=speed, after=after, text=text,
                      normalize=normalize)

    def warm_up(self) -> None:
        """Run G2P and one synthesis now, so the first request pays neither."""
        phonemes = self.phonemizer.phonemize(WARM_UP_TEXT, voice=self.default_voice)
        for chunk in phonemes:
            self.engine.synthesize(chunk, style_for(self.voice_book.pack(self.default_voice), chunk), 1.0)

    def measure_pace(self, *, runs: int = 3) -> float:
        """This machine's decoder pace (``decoder_pace`` on the warm-up sentence); after warm_up."""
        return warm_up_pace(self.engine, self.phonemizer, voice=self.default_voice,
                            pack=self.voice_book.pack(self.default_voice), runs=runs)

    def keep_up(self, pace: float, *, remeasure: bool = False) -> None:
        """Size windows so the decoder at ``pace`` keeps ahead of the listener (WindowPlan.pace);
        before serving: jobs read the plan. ``remeasure``: ``pace`` was measured, and is measured
        again when the engine goes idle (PaceMeter), so one busy warm-up does not size every window."""
        self.pace = PaceMeter(remeasure=remeasure and pace > 0)
        self.pace.add(pace)
        if self.plan is not None:
            self.plan = replace(self.plan, pace=pace)

    def _remeasure_pace(self) -> None:
        """The scheduler's idle hook (worker thread, nothing queued): measure the pace again when due."""
        if self.plan is None or not self.pace.due():
            return
        pace = self.pace.add(self.measure_pace(runs=1))
        self.plan = replace(self.plan, pace=pace)

    def close(self) -> None:
        """Drop queued G2P and wait for the one running: spaCy's pipeline is never used by two
        threads, nor torn down under one."""
        self._g2p.shutdown(wait=True, cancel_futures=True)


def _pick_default(voices: dict[str, np.ndarray]) -> str:
    return "af_heart" if "af_heart" in voices else sorted(voices)[0]


class Speech:
    """Pieces of text on their way to audio. Iterate it for chunks (windows) in order; ``cancel``
    drops the rest.

    A G2P task phonemizes the pieces ahead (one model job per sentence in a piece; G2P splits only
    what exceeds the model's 510 phonemes). Model jobs are queued one at a time, in order: a chunk's
    first window, its next windows (the decoder state is sequential), then the next chunk's. Each
    job is queued from the completion hook (``then``) of the job before it, before the model picks
    its next job, so a session whose listener is about to run dry competes for that pick; queued
    from a task instead, its next window would always lose the pick to another session's job (up
    to ~2 s of model time on a 2-core CPU). At most LOOKAHEAD windows are queued or finished ahead of the reader.
    With ``after`` nothing is queued until the previous speech has queued all its jobs, so one
    owner's jobs reach the model in the order they were spoken.
    """

    def __init__(
        self, synth: Synthesizer, *, owner: Hashable, pieces: Iterable[str], voice: str, speed: float,
        after: "Speech | None", text: str | None = None, normalize: Normalization = NORMALIZE_ALL,
    ) -> None:
        self._synth = synth
        self._owner = owner
        self._pieces = pieces
        self._text = text
        self._normalize = normalize  # which normalization rules G2P applies (protocol: normalize)
        self._voice = voice
        self._speed = speed
        self._chunks: asyncio.Queue[tuple[str, tuple[PlacedWord, ...]] | None] = asyncio.Queue(LOOKAHEAD)
        self._jobs: asyncio.Queue[asyncio.Future[TimedSynthesis] | None] = asyncio.Queue()  # for the reader
        self._pending: list[asyncio.Future[TimedSynthesis]] = []  # queued, not read yet
        self._decoding: Decoding | None = None  # the chunk being decoded, while it has windows left
        self._busy = False  # one of our jobs is queued or on the model
        self._frames_made = 0  # ahead of the next chunk (carried, then decoded): windows grow from it
        self._started = False  # the first chunk is queued: _frames_made starts from what was carried
        self._followers: list[Callable[[], None]] = []  # speeches waiting for all_queued
        self.all_queued = asyncio.Event()
        self._ready = after is None or after.all_queued.is_set()
        if not self._ready and after is not None:
            after._followers.append(self._after_queued)
        self.error: BaseException | None = None
        self.cancelled = False  # cancel() ran: iteration ends early, with what was read so far
        self._g2p = asyncio.create_task(self._phonemize_all())

    async def _phonemize_all(self) -> None:
        notes = G2PNotes()  # what the G2P libraries warn about in all the pieces: one log line
        try:
            aligner = TextAligner(self._text)  # word offsets point into the text as the client sent it
            for piece in self._pieces:
                aligner.extend(piece)
                for chunk in await self._synth.phonemize(piece, voice=self._voice, notes=notes,
                                                           normalize=self._normalize):
                    for job in chunk_jobs(chunk):
                        await self._chunks.put((job.phonemes, aligner.place(job.words)))
                        self._advance()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # G2P failed: the reader raises it after what was queued
            self.error = exc
        finally:
            notes.log()
        await self._chunks.put(None)
        self._advance()

    def _after_queued(self) -> None:
        self._ready = True
        self._advance()

    def _advance(self) -> None:
        """Queue the next job, unless one is queued or running, the reader is LOOKAHEAD behind, or
        G2P has not reached the next chunk (each of those calls this again when it changes)."""
        if self._busy or not self._ready or self.all_queued.is_set() or len(self._pending) >= LOOKAHEAD:
            return
        if self._decoding is not None:
            decoding, self._decoding = self._decoding, None
            future = self._synth.submit_step(owner=self._owner, decoding=decoding, then=self._finished)
        else:
            try:
                chunk = self._chunks.get_nowait()
            except asyncio.QueueEmpty:
                return
            if chunk is None:
                self._all_queued()
                return
            phonemes, words = chunk
            if not self._started:  # the owner's earlier audio still playing counts as ours
                self._started = True
                self._frames_made = self._synth.carried_frames(self._owner)
            future = self._synth.submit(
                owner=self._owner, phonemes=phonemes, voice=self._voice, speed=self._speed, words=words,
                frames_before=self._frames_made, then=self._finished,
            )
        self._busy = True
        future.add_done_callback(self._settled)
        self._pending.append(future)
        self._jobs.put_nowait(future)

    def _finished(self, result: TimedSynthesis) -> None:
        """The scheduler's hook: a job of ours succeeded; queue the next before the model picks."""
        self._busy = False
        self._frames_made += result.frames  # set on a chunk's first window
        self._decoding = result.decoding
        self._advance()

    def _settled(self, future: asyncio.Future[TimedSynthesis]) -> None:
        if future.cancelled() or future.exception() is not None:  # the reader raises it; the chunk's
            self._busy = False  # remaining windows go with its decoder state, the next chunk goes on
            self._advance()

    def _all_queued(self) -> None:
        self.all_queued.set()
        self._jobs.put_nowait(None)
        self._release_followers()

    def _release_followers(self) -> None:
        followers, self._followers = self._followers, []
        for follower in followers:
            follower()

    async def __aiter__(self) -> AsyncIterator[TimedSynthesis]:
        """Windows in order; their word times count from the start of this speech's audio. After
        ``cancel`` it ends at the next window (check ``cancelled``)."""
        samples = 0
        while True:
            future = await self._jobs.get()
            if future is None:
                if self.error is not None:
                    raise self.error
                return
            try:
                chunk = await future
                offset_ms = round(samples * 1000 / NATIVE_SAMPLE_RATE)
                samples += len(chunk.synthesis.audio)
                yield (replace(chunk, words=tuple(word.shifted(offset_ms) for word in chunk.words))
                       if chunk.words else chunk)
            finally:
                if future in self._pending:
                    self._pending.remove(future)
                    self._advance()

    def cancel(self) -> None:
        """Drop what is left; a reader waiting for the next window ends (its queue gets the end
        marker here: G2P may not have queued a job yet, and then nothing else would wake it)."""
        self._g2p.cancel()
        self._decoding = None
        self.cancelled = True
        if not self.all_queued.is_set():
            self.all_queued.set()  # _advance queues nothing more
            self._jobs.put_nowait(None)
        self._release_followers()
        for future in self._pending:
            future.cancel()
        self._pending.clear()
