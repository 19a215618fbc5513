"""What a speech needs to turn text into audio: voices, G2P, and model jobs on the shared queue.

A :class:`Synthesizer` is shared by every route and session; a Speech (speech.py) drives it, one
utterance at a time. It knows voices, runs G2P in its own thread beside the model's, and queues
model jobs: a chunk's front and first window (:meth:`submit`), then one window per job
(:meth:`submit_step`). How many frames each window decodes is the job sizer's decision (sizing.py),
asked here, once per job, as the job starts on the model: then the listener's queued audio is what
it will be while the window is decoded. A chunk's first window is sent without most of the model's
silence before its speech (lead.py), and the sizer is told how much; its last window, without most
of the silence after (tail.py). Windows are separate scheduler jobs, so other sessions' work
interleaves between them; a cancel drops the windows not yet decoded and halts the one on the model
(engines/halt.py), so the next answer after a barge-in does not wait for it. The decoder's cost the
sizer reads is measured (pace.PaceMeter): at warm-up, when the engine is idle, then fitted to the
windows decoded; or pinned (KOKORO_DECODER_PACE).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Hashable

import numpy as np

from voicestream.protocol import NATIVE_SAMPLE_RATE
from voicestream.protocol.normalization import NORMALIZE_ALL, Normalization

from .engines import Decoding, Engine, Synthesis
from .engines.halt import Halt
from .g2p import G2PNotes, PhonemeChunk, Phonemizer
from .languages import READERS, resolve_language, served_languages
from .lead import heard_part, silent_lead
from .model_dir import style_for
from .pace import WARM_UP_LANG, WARM_UP_TEXT, PaceMeter, warm_up_pace, warm_up_windows
from .scheduler import Scheduler
from .sizing import Cost, JobSizer, Situation, Sizer, profile_for
from .tail import heard_end
from .voices import VoiceBook
from .words import PlacedWord, WordTiming, word_timings

log = logging.getLogger(__name__)


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


@dataclass
class _Queues:
    """The listeners' queues a job is sized by: filled on the loop as the job starts, read by the
    job on the worker thread after (the scheduler starts it only then)."""

    queued_s: float = 0.0
    others_s: float | None = None
    ran_dry: bool = False


class Synthesizer:
    """Voices, G2P, and the model queue every route shares; a leaf: it knows no speech or session."""

    def __init__(
        self, *, engine: Engine, voices: dict[str, np.ndarray], scheduler: Scheduler,
        default_voice: str | None = None, vocab: Mapping[str, int] | None = None, sizer: JobSizer | None = None,
        languages: tuple[str, ...] | None = None,
    ) -> None:
        """``sizer``: how many frames each job decodes (sizing.py; the engine's device picks the
        profile); a benchmark passes another to compare (bench/variants.py). ``languages``: those to
        serve, of the ones whose G2P is installed (None: all of them; KOKORO_LANGUAGES)."""
        self.engine = engine
        self.pace = PaceMeter()
        self.sizer: JobSizer = sizer or Sizer(profile_for(engine.device))
        self.voices = voices
        self.voice_book = VoiceBook(packs=voices)
        self.vocab = vocab  # the model's phoneme ids: symbols outside it have no duration
        # where each chunk's last word ends (samples from its start), for its last window (tail.py);
        # written and read by the job running the chunk's windows, which run one at a time
        self._words_end: weakref.WeakKeyDictionary[Decoding, int] = weakref.WeakKeyDictionary()
        self.scheduler = scheduler
        self.phonemizer = Phonemizer()
        self.languages = tuple(code for code in served_languages() if languages is None or code in languages)
        self.default_voice = default_voice if default_voice in voices else _pick_default(voices)
        # G2P runs in its own thread, beside the model's, so one overlaps the other.
        self._g2p = ThreadPoolExecutor(1, thread_name_prefix="kokoro-g2p")
        scheduler.on_idle(self._remeasure_pace)

    def resolve_voice(self, voice: str | None, *, field: str = "voice") -> str:
        """The voice (or blend, ``af_bella(2)+af_sky(1)``) to speak with; ProtocolError naming ``field``."""
        if voice is None:
            return self.default_voice
        return self.voice_book.resolve(voice, field=field)

    def resolve_language(self, voice: str, lang: str | None, *, field: str = "lang", voice_field: str = "voice") -> str:
        """The language ``voice`` reads in (``lang`` when given); ProtocolError ``unsupported_language``
        naming ``field`` (``voice_field`` when the voice chose it) for one this server cannot read."""
        return resolve_language(voice, lang, served=self.languages, field=field, voice_field=voice_field)

    async def phonemize(
        self, text: str, *, voice: str, lang: str | None = None, notes: G2PNotes | None = None,
        normalize: Normalization = NORMALIZE_ALL,
    ) -> list[PhonemeChunk]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._g2p, lambda: self.phonemizer.chunks(text, voice=voice, lang=lang, notes=notes, options=normalize))

    @property
    def cost(self) -> Cost:
        """The decoder's cost windows are sized by now."""
        return self.pace.current

    def submit(
        self, *, owner: Hashable, phonemes: str, voice: str, speed: float, words: tuple[PlacedWord, ...] = (),
        then: Callable[[TimedSynthesis], None] | None = None,
    ) -> asyncio.Future[TimedSynthesis]:
        """Queue a chunk's front and first window; ``result.decoding`` decodes the rest (``submit_step``).
        ``then``: the scheduler's completion hook (Scheduler.submit)."""
        style = style_for(self.voice_book.pack(voice), phonemes)
        queues = _Queues()
        halt = Halt()

        def run() -> TimedSynthesis:
            started = time.perf_counter()
            decoding = self.engine.begin(phonemes, style, speed, halt=halt)
            lead = silent_lead(decoding.durations, speed, others_s=queues.others_s)
            audio, _ = self._window(decoding, queues, halt, lead=lead)
            timings = word_timings(words, phonemes=phonemes, durations=decoding.durations,
                                   samples=decoding.frames * decoding.samples_per_frame, vocab=self.vocab)
            if timings:  # the chunk's last window keeps its last word whole (tail.py)
                self._words_end[decoding] = math.ceil(max(t.end_ms for t in timings) * NATIVE_SAMPLE_RATE / 1000)
            heard = heard_part(audio, lead, decoding.samples_per_frame)  # the silence before speech is not sent
            if heard.size < audio.size:
                cut_ms = round((audio.size - heard.size) * 1000 / NATIVE_SAMPLE_RATE)
                audio, timings = heard, tuple(t.shifted(-min(cut_ms, t.start_ms)) for t in timings)
            if decoding.done:  # one window: the silence after the speech is not sent either
                audio = self._heard_end(decoding, audio, queues)
            return TimedSynthesis(
                synthesis=Synthesis(audio=audio, durations=decoding.durations),
                synthesis_s=time.perf_counter() - started, decoding=None if decoding.done else decoding,
                words=timings, frames=decoding.frames,
            )

        return self._queue(owner, run, halt, then, queues)

    def submit_step(
        self, *, owner: Hashable, decoding: Decoding, then: Callable[[TimedSynthesis], None] | None = None,
    ) -> asyncio.Future[TimedSynthesis]:
        """Queue the next window of a chunk whose first window is done."""
        queues = _Queues()
        halt = Halt()

        def run() -> TimedSynthesis:
            audio, spent = self._window(decoding, queues, halt)
            if decoding.done:  # the chunk's last window: the silence after its speech is not sent
                audio = self._heard_end(decoding, audio, queues)
            return TimedSynthesis(synthesis=Synthesis(audio=audio), synthesis_s=spent,
                                  decoding=None if decoding.done else decoding)

        return self._queue(owner, run, halt, then, queues)

    def _heard_end(self, decoding: Decoding, last_window: np.ndarray, queues: _Queues) -> np.ndarray:
        """The chunk's last window less the silence after its speech (tail.py), its last word kept
        whole: the window's audio is the chunk's last ``last_window.size`` samples."""
        words_end = self._words_end.pop(decoding, 0)
        keep = words_end - (decoding.frames * decoding.samples_per_frame - last_window.size)
        return heard_end(last_window, decoding.samples_per_frame, others_s=queues.others_s, keep=keep)

    def _window(self, decoding: Decoding, queues: _Queues, halt: Halt, *, lead: int = 0) -> tuple[np.ndarray, float]:
        """Decode ``decoding``'s next window as the sizer sizes it (the worker thread), from the
        listeners' queues as the job started (read on the loop: ``_queue``); ``lead``: the chunk's
        first frames, not heard (lead.py). Returns the audio and its seconds."""
        situation = Situation(left=decoding.left, started=decoding.started, cost=self.cost, others_s=queues.others_s,
                              queued_s=queues.queued_s, ran_dry=queues.ran_dry, lead=lead)
        started = time.perf_counter()
        audio = decoding.step(self.sizer.next_window(situation), halt)
        spent = time.perf_counter() - started
        self._observe(decoding.decoded_last, spent)
        return audio, spent

    def job_frames(self, owner: Hashable) -> int:
        """Frames one job of ``owner``'s may hold when its speech joins the sentences G2P has ready
        (the sizer's ``job_frames``; the loop's reading of the listeners' queues)."""
        return self.sizer.job_frames(Situation(queued_s=self.scheduler.queued_audio_s(owner), cost=self.cost,
                                               others_s=self.scheduler.others_queued_s(owner)))

    def _queue(
        self, owner: Hashable, run: Callable[[], TimedSynthesis], halt: Halt,
        then: Callable[[TimedSynthesis], None] | None, queues: _Queues,
    ) -> asyncio.Future[TimedSynthesis]:
        """Queue ``run`` on the model; ``queues`` is filled as the job starts (on the loop, with the
        scheduler's accounts as they are then). Cancelling its future stops it even once it runs
        (``halt``: a barge-in's next answer does not wait behind the window being decoded,
        engines/halt.py)."""

        def read_queues() -> None:
            queues.queued_s = self.scheduler.queued_audio_s(owner)
            queues.others_s = self.scheduler.others_queued_s(owner)
            queues.ran_dry = self.scheduler.ran_dry(owner)

        future: asyncio.Future[TimedSynthesis] = self.scheduler.submit(owner, run, audio_s=_audio_s, then=then,
                                                                       at_start=read_queues)
        future.add_done_callback(halt.when_cancelled)
        return future

    def warm_up(self) -> None:
        """Run G2P (every served language's reader: each loads its dictionary on first use) and one
        synthesis now, so the first request pays neither."""
        for code in self.languages:
            self.phonemizer.phonemize(READERS[code].greeting, voice=self.default_voice, lang=code)
        phonemes = self.phonemizer.phonemize(WARM_UP_TEXT, voice=self.default_voice, lang=WARM_UP_LANG)
        for chunk in phonemes:
            self.engine.synthesize(chunk, style_for(self.voice_book.pack(self.default_voice), chunk), 1.0)

    def measure_pace(self, *, runs: int = 3) -> float:
        """This machine's decoder pace (``decoder_pace`` on the warm-up sentence); after warm_up."""
        return warm_up_pace(self.engine, self.phonemizer, voice=self.default_voice,
                            pack=self.voice_book.pack(self.default_voice), runs=runs)

    def measure_windows(self) -> list[tuple[int, float]]:
        """Windows of two sizes decoded now (pace.warm_up_windows), for ``keep_up``; after warm_up."""
        return warm_up_windows(self.engine, self.phonemizer, voice=self.default_voice,
                               pack=self.voice_book.pack(self.default_voice))

    def keep_up(self, cost: Cost, *, remeasure: bool = False, decoded: Sequence[tuple[int, float]] = ()) -> None:
        """Size windows by ``cost`` (before serving). ``remeasure``: the cost was measured; it is
        fitted to the windows ``decoded`` (frames, seconds) at warm-up, then to those served
        (PaceMeter), so one busy warm-up does not size every window."""
        self.pace = PaceMeter(remeasure=remeasure and cost.pace > 0)
        self.pace.add(cost)
        for frames, seconds in decoded:
            self.pace.observe(frames, seconds)

    def _observe(self, frames: int, seconds: float) -> None:
        """A window of ``frames`` decoded frames took ``seconds`` (worker thread): the meter fits the cost to it."""
        was = self.pace.fitted
        if self.pace.observe(frames, seconds) and not was and self.pace.fitted:
            cost = self.pace.current  # the first fit: say what replaced the warm-up pace
            log.info("windows now follow the decoder cost fitted to the windows decoded: %.0f ms a call and "
                     "%.3f s per audio second", 1000 * cost.overhead, cost.pace)

    def _remeasure_pace(self) -> None:
        """The scheduler's idle hook (worker thread, nothing queued): measure the pace again when due."""
        if self.pace.due():
            self.pace.add(Cost(pace=self.measure_pace(runs=1)))

    def close(self) -> None:
        """Drop queued G2P and wait for the one running: spaCy's pipeline is never used by two
        threads, nor torn down under one."""
        self._g2p.shutdown(wait=True, cancel_futures=True)


def _pick_default(voices: dict[str, np.ndarray]) -> str:
    return "af_heart" if "af_heart" in voices else sorted(voices)[0]
