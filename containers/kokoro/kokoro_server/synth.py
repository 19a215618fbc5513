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
other listener would wait on it: window_cap), decoded exactly as in one shot, since its listener
has that audio to hear meanwhile; sentences G2P has ready behind it join it in one job (speech.py).
Only a speech's start pays for small windows (their context frames are decoded
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
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Hashable

import numpy as np

from voicestream.protocol.normalization import NORMALIZE_ALL, Normalization

from .engines import Decoding, Engine, Synthesis, WindowPlan
from .engines.windows import FRAME_S, HEADROOM
from .g2p import G2PNotes, PhonemeChunk, Phonemizer
from .languages import READERS, resolve_language, served_languages
from .model_dir import style_for
from .pace import WARM_UP_LANG, WARM_UP_TEXT, DecoderCost, PaceMeter, warm_up_pace
from .scheduler import Scheduler
from .voices import VoiceBook
from .words import PlacedWord, WordTiming, word_timings

if TYPE_CHECKING:
    from .speech import Speech

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


class Synthesizer:
    """Everything a route needs to turn text into audio: voices, G2P, the fair model queue."""

    def __init__(
        self, *, engine: Engine, voices: dict[str, np.ndarray], scheduler: Scheduler,
        default_voice: str | None = None, windowed: bool = True, plan: WindowPlan | None = None,
        vocab: Mapping[str, int] | None = None, languages: tuple[str, ...] | None = None,
    ) -> None:
        """``windowed=False``: every chunk in one shot (bench/variants.py compares it). ``languages``:
        those to serve, of the ones whose G2P is installed (None: all of them; KOKORO_LANGUAGES)."""
        self.engine = engine
        self.pace = PaceMeter()
        self.plan = (plan or WindowPlan()) if windowed and getattr(engine, "windowed", False) else None
        self.voices = voices
        self.voice_book = VoiceBook(packs=voices)
        self.vocab = vocab  # the model's phoneme ids: symbols outside it have no duration
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
        if plan is not None and follows:
            plan = replace(plan, continued=self.window_cap(owner))

        def run() -> TimedSynthesis:
            started = time.perf_counter()
            decoding = self.engine.begin(phonemes, style, speed, plan=plan)
            if follows:  # the listener's audio as the job starts: with what the owner's jobs ahead made
                decoding.follow(frames_before, queued=self.scheduler.queued_audio_s(owner) / FRAME_S)
            stepped = time.perf_counter()
            audio = decoding.step()
            done = time.perf_counter()
            spent = done - started
            self._observe(decoding, done - stepped)
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
            spent = time.perf_counter() - started
            self._observe(decoding, spent)
            return TimedSynthesis(synthesis=Synthesis(audio=audio), synthesis_s=spent,
                                  decoding=None if decoding.done else decoding)

        return self.scheduler.submit(owner, run, audio_s=_audio_s, then=then)

    def ahead(self, owner: Hashable, decoding: Decoding) -> bool:
        """Whether ``owner``'s listener has enough audio queued to hear while the rest of
        ``decoding`` (its frames and the context before them) is decoded in one window: the rest
        fits in what one window may decode now (:meth:`window_frames`). Without a pace
        (KOKORO_DECODER_PACE=0) windows never join: the text alone decides them."""
        return decoding.remaining > 1 and decoding.rest_frames <= self.window_frames(owner)

    def window_cap(self, owner: Hashable) -> int:
        """Frames one window of ``owner``'s may hold after its speech's first (the plan's: ``plan``
        is set): ``continued_alone`` while no other owner has work; else ``continued``, or more, up to
        ``continued_alone``, while every other listener with work queued has audio to hear for the
        longer window's decoding at the plan's pace (within HEADROOM of it). A newcomer waiting for
        its first audio has none: it gets ``continued``. Without a pace, ``continued`` whenever
        another owner has work (no estimate of what it would wait)."""
        plan = self.plan
        assert plan is not None
        others = self.scheduler.others_queued_s(owner)
        if others is None:
            return plan.continued_alone
        if not plan.pace:
            return plan.continued
        return max(plan.continued, min(plan.continued_alone, self._frames_within(others)))

    def window_frames(self, owner: Hashable) -> int:
        """Frames one window of ``owner``'s may decode now: at most ``largest`` and
        :meth:`window_cap`, and no more than the plan's pace decodes in HEADROOM of the audio
        ``owner``'s listener has queued. 0 without a pace: then the text alone decides windows and jobs."""
        plan = self.plan
        if plan is None or not plan.pace:
            return 0
        return min(plan.largest, self.window_cap(owner), self._frames_within(self.scheduler.queued_audio_s(owner)))

    def joinable_frames(self, owner: Hashable) -> int:
        """Frames one job of ``owner``'s sentences may hold when a speech joins those G2P has ready
        (Speech._joined): one window's (:meth:`window_frames`). The bench's ``sentence_jobs``
        variant joins nothing by returning 0 here."""
        return self.window_frames(owner)

    def _frames_within(self, seconds: float) -> int:
        """Frames one window may decode in HEADROOM of ``seconds`` at the plan's cost (it has a pace)."""
        assert self.plan is not None and self.plan.pace
        return self.plan.frames_within(HEADROOM * seconds)

    def speech(
        self, *, owner: Hashable, pieces: Iterable[str], voice: str, speed: float, after: "Speech | None" = None,
        text: str | None = None, normalize: Normalization = NORMALIZE_ALL, lang: str | None = None,
    ) -> "Speech":
        """Speak ``pieces`` (sentences already cut; an iterator is read as G2P reaches it).
        ``text``: what the pieces were cut from, for word offsets (None: the pieces, joined by spaces).
        ``lang``: the language to read in (None: the voice's), checked by :meth:`resolve_language`."""
        from .speech import Speech  # Speech reads the Synthesizer: imported here, not at the top

        return Speech(self, owner=owner, pieces=pieces, voice=voice, speed=speed, after=after, text=text,
                      normalize=normalize, lang=lang)

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

    def keep_up(self, cost: DecoderCost, *, remeasure: bool = False) -> None:
        """Size windows so the decoder at ``cost`` keeps ahead of the listener (WindowPlan.pace and
        overhead); before serving: jobs read the plan. ``remeasure``: the pace was measured, and is
        measured again when the engine goes idle, then fitted to the windows decoded (PaceMeter), so
        one busy warm-up does not size every window."""
        self.pace = PaceMeter(remeasure=remeasure and cost.pace > 0)
        self._follow(self.pace.add(cost))

    def _follow(self, cost: DecoderCost) -> None:
        """Cut windows by ``cost`` from now on (jobs already begun keep their windows)."""
        if self.plan is not None:
            self.plan = replace(self.plan, pace=cost.pace, overhead=cost.overhead)

    def _observe(self, decoding: Decoding, seconds: float) -> None:
        """A window of ``decoding`` took ``seconds`` (worker thread): the meter fits the cost to it."""
        if self.plan is not None and self.pace.observe(decoding.decoded_last, seconds):
            cost, was = self.pace.current, self.plan
            self._follow(cost)
            if cost.overhead and not was.overhead:  # the first fit: say what replaced the warm-up pace
                log.info("windows now follow the decoder cost fitted to the windows decoded: %.0f ms a call and "
                         "%.3f s per audio second", 1000 * cost.overhead, cost.pace)

    def _remeasure_pace(self) -> None:
        """The scheduler's idle hook (worker thread, nothing queued): measure the pace again when due."""
        if self.plan is None or not self.pace.due():
            return
        self._follow(self.pace.add(DecoderCost(pace=self.measure_pace(runs=1))))

    def close(self) -> None:
        """Drop queued G2P and wait for the one running: spaCy's pipeline is never used by two
        threads, nor torn down under one."""
        self._g2p.shutdown(wait=True, cancel_futures=True)


def _pick_default(voices: dict[str, np.ndarray]) -> str:
    return "af_heart" if "af_heart" in voices else sorted(voices)[0]
