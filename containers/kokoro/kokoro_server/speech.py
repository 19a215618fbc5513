"""One speech: pieces of text through G2P and model jobs, pipelined ahead of whoever reads the audio.

Synthesizer (synth.py) holds what every speech shares: voices, G2P and the model queue. A Speech is
one utterance's pipeline: its G2P task, the order of its jobs, and which sentences go to the model
together (:meth:`Speech._joined`, as large as the job sizer lets one job be: sizing.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Hashable

from voicestream.protocol import NATIVE_SAMPLE_RATE
from voicestream.protocol.normalization import NORMALIZE_ALL, Normalization

from .engines import MAX_PHONEMES, Decoding
from .g2p import G2PNotes, chunk_jobs
from .synth import Synthesizer, TimedSynthesis
from .words import PlacedWord, TextAligner

# How many chunks (windows) of one speech may sit finished or queued ahead of its reader. A few
# keep the model busy across window and sentence boundaries while bounding what a slow reader holds.
LOOKAHEAD = 3


@dataclass(frozen=True)
class Job:
    """Phonemes for one model job and their words (phoneme offsets into ``phonemes``)."""

    phonemes: str
    words: tuple[PlacedWord, ...]

    def then(self, other: "Job") -> "Job":
        """This job and ``other`` as one: their phonemes with a space between, as G2P joins words."""
        shift = len(self.phonemes) + 1
        moved = tuple(replace(w, word=replace(w.word, phoneme_start=w.word.phoneme_start + shift,
                                              phoneme_end=w.word.phoneme_end + shift)) for w in other.words)
        return Job(f"{self.phonemes} {other.phonemes}", self.words + moved)


class Speech:
    """Pieces of text on their way to audio. Iterate it for chunks (windows) in order; ``cancel``
    drops the rest.

    A G2P task phonemizes the pieces ahead (one chunk per sentence in a piece; G2P splits only
    what exceeds the model's 510 phonemes). Once the listener has audio to hear, sentences G2P has
    ready are joined into one job while they fit in what one job may hold (:meth:`_joined`). Model jobs are
    queued one at a time, in order: a chunk's first window, its next windows (the decoder state is
    sequential), then the next chunk's. Each job is queued from the completion hook (``then``) of
    the job before it, before the model picks its next job, so a session whose listener is about
    to run dry competes for that pick; queued from a task instead, its next window would always
    lose the pick to another session's job (up to ~2 s of model time on a 2-core CPU). At most
    LOOKAHEAD windows are queued or finished ahead of the reader. With ``after`` nothing is
    queued until the previous speech has queued all its jobs, so one
    owner's jobs reach the model in the order they were spoken.
    """

    def __init__(
        self, synth: Synthesizer, *, owner: Hashable, pieces: Iterable[str], voice: str, speed: float,
        after: "Speech | None" = None, text: str | None = None, normalize: Normalization = NORMALIZE_ALL,
        lang: str | None = None,
    ) -> None:
        self._synth = synth
        self._owner = owner
        self._pieces = pieces
        self._text = text
        self._normalize = normalize  # which normalization rules G2P applies (protocol: normalize)
        self._voice = voice
        self._lang = lang  # the G2P language (None: the voice's)
        self._speed = speed
        self._chunks: asyncio.Queue[Job | None] = asyncio.Queue(LOOKAHEAD)
        self._held: list[Job | None] = []  # taken from _chunks and not joined: the next job's start
        self._jobs: asyncio.Queue[asyncio.Future[TimedSynthesis] | None] = asyncio.Queue()  # for the reader
        self._pending: list[asyncio.Future[TimedSynthesis]] = []  # queued, not read yet
        self._decoding: Decoding | None = None  # the chunk being decoded, while it has windows left
        self._busy = False  # one of our jobs is queued or on the model
        self._frames_decoded = 0  # of this speech's chunks, and their tokens: frames per token so far
        self._tokens_decoded = 0
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
                for chunk in await self._synth.phonemize(piece, voice=self._voice, lang=self._lang, notes=notes,
                                                           normalize=self._normalize):
                    for job in chunk_jobs(chunk):
                        await self._chunks.put(Job(job.phonemes, aligner.place(job.words)))
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
            taken = self._take()
            if not taken:
                return
            chunk = taken[0]
            if chunk is None:
                self._all_queued()
                return
            chunk = self._joined(chunk)
            future = self._synth.submit(
                owner=self._owner, phonemes=chunk.phonemes, voice=self._voice, speed=self._speed, words=chunk.words,
                then=self._finished,
            )
        self._busy = True
        future.add_done_callback(self._settled)
        self._pending.append(future)
        self._jobs.put_nowait(future)

    def _take(self) -> list[Job | None]:
        """The next chunk G2P made ([None]: the end), or [] while G2P has not reached it."""
        if self._held:
            return [self._held.pop()]
        try:
            return [self._chunks.get_nowait()]
        except asyncio.QueueEmpty:
            return []

    def _joined(self, job: Job) -> Job:
        """``job`` and the sentences G2P has ready behind it, as one model job, while their frames
        (estimated at this speech's frames per token so far) fit in what one job may hold now
        (Synthesizer.job_frames: the listeners' queued audio covers their decoding). Each model
        call has a fixed cost (on the tiny CPU model, per-sentence calls took 1.18x the time of
        pairs: docs/throughput.md), and a joined sentence pays for no small first window."""
        budget = self._synth.job_frames(self._owner)
        if not budget or not self._tokens_decoded:
            return job
        per_token = self._frames_decoded / self._tokens_decoded
        while True:
            taken = self._take()
            if not taken:
                return job
            following = taken[0]
            if following is not None:
                joined = job.then(following)
                if len(joined.phonemes) <= MAX_PHONEMES and (len(joined.phonemes) + 2) * per_token <= budget:
                    job = joined
                    continue
            self._held.append(following)
            return job

    def _finished(self, result: TimedSynthesis) -> None:
        """The scheduler's hook: a job of ours succeeded; queue the next before the model picks."""
        self._busy = False
        durations = result.synthesis.durations
        if result.frames and durations is not None:
            self._frames_decoded += result.frames
            self._tokens_decoded += len(durations)
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
