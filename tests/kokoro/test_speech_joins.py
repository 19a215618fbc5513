"""Fewer, longer model jobs once the listener is ahead (speech.py's ``_joined``, Synthesizer.job_frames).

On the tiny torch model with a frozen scheduler clock: a listener's queued audio is then all the
audio made for it, so what may join depends on the text and the pace alone.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until_async

from kokoro_server.engines import load_engine
from kokoro_server.model_dir import ModelDir, open_model_dir
from kokoro_server.scheduler import Scheduler
from kokoro_server.sizing import Cost, Sizer
from kokoro_server.speech import Speech
from kokoro_server.synth import Synthesizer
from voicestream.chunker import iter_sentences

pytestmark = pytest.mark.kokoro

TEXT = ("Start with where the router sits. Put it up high. Keep it in the open. "
        "Walls and floors weaken the signal. Then check the channel it uses.")
SENTENCES = 5
PACE = 0.05  # seconds of decoding per audio second: far ahead of the listener once it speaks


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> tuple[ModelDir, Any]:
    model = open_model_dir(tiny_model)
    return model, load_engine(model)


async def speak(tiny: tuple[ModelDir, Any], *, pace: float) -> tuple[list[Any], int]:
    """The speech's windows and how many model jobs began a chunk. The model is held until G2P has
    reached the last sentence, so every sentence is ready when the first job ends."""
    model, engine = tiny
    scheduler = Scheduler(workers=1, clock=lambda: 0.0)
    await scheduler.start()
    synth = Synthesizer(engine=engine, voices=model.voices, scheduler=scheduler, default_voice="af_heart",
                        vocab=model.vocab)
    synth.keep_up(Cost(pace=pace))
    phonemized: list[str] = []
    phonemize = synth.phonemize

    async def counted(text: str, **options: Any) -> Any:
        phonemized.append(text)
        return await phonemize(text, **options)

    synth.phonemize = counted  # type: ignore[method-assign]
    held = threading.Event()
    blocker = scheduler.submit("someone else", lambda: held.wait(30))
    try:
        speech = Speech(synth, owner="listener", pieces=iter_sentences(TEXT), text=TEXT, voice="af_heart", speed=1.0)
        await wait_until_async(lambda: asyncio.sleep(0, len(phonemized)), until=lambda n: n >= SENTENCES)
        held.set()
        await blocker
        windows = [window async for window in speech]
    finally:
        held.set()
        await scheduler.stop()
        synth.close()
    return windows, sum(1 for window in windows if window.frames)


def test_sentences_ready_behind_the_first_are_joined_with_every_word_in_place(tiny: tuple[ModelDir, Any]) -> None:
    joined, jobs = asyncio.run(speak(tiny, pace=PACE))
    apart, apart_jobs = asyncio.run(speak(tiny, pace=0.0))  # a free decoder: each sentence one window, none joined
    assert apart_jobs == SENTENCES
    assert 2 <= jobs < SENTENCES, jobs  # the first sentence alone (first audio), then joined ones
    words = [w for window in joined for w in window.words]
    assert [w.text for w in words] == [w.text for window in apart for w in window.words]
    assert [(w.char_start, w.char_end) for w in words] == [
        (w.char_start, w.char_end) for window in apart for w in window.words]
    for word in words:
        assert TEXT[word.char_start:word.char_end] == word.text
    starts = [w.start_ms for w in words]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    audio_ms = 1000 * sum(window.seconds for window in joined)
    assert words[-1].end_ms <= audio_ms + 1
    assert abs(audio_ms - 1000 * sum(window.seconds for window in apart)) < 0.25 * audio_ms


def job_frames(tiny: tuple[ModelDir, Any], *, pace: float, other_queued_s: float | None) -> int:
    """Synthesizer.job_frames for "listener", 10 s of its audio queued, while another owner has a
    job on the model whose own listener has ``other_queued_s`` of audio queued (None: no other)."""
    model, engine = tiny

    async def scenario() -> int:
        scheduler = Scheduler(workers=1, clock=lambda: 0.0)
        await scheduler.start()
        synth = Synthesizer(engine=engine, voices=model.voices, scheduler=scheduler, default_voice="af_heart")
        synth.keep_up(Cost(pace=pace))
        held = threading.Event()
        try:
            await scheduler.submit("listener", lambda: None, audio_s=lambda _: 10.0)
            if other_queued_s is not None:
                if other_queued_s:
                    await scheduler.submit("other", lambda: None, audio_s=lambda _: other_queued_s)
                running = scheduler.submit("other", lambda: held.wait(30))
                await wait_until_async(lambda: asyncio.sleep(0, scheduler.running))
            frames = synth.job_frames("listener")
            held.set()
            if other_queued_s is not None:
                await running
            return frames
        finally:
            held.set()
            await scheduler.stop()
            synth.close()

    return asyncio.run(scenario())


def test_a_joined_job_holds_the_engine_longer_only_while_every_other_listener_has_audio_to_cover_it(
    tiny: tuple[ModelDir, Any]
) -> None:
    # at pace 0.05 a frame decodes in 1.25 ms: 7 s (0.7 of the listener's 10 s) cover 5600, the
    # 2 s a window may hold the decoder 1600, largest 1200
    assert job_frames(tiny, pace=0.05, other_queued_s=None) == 1200  # alone
    assert job_frames(tiny, pace=0.05, other_queued_s=30.0) == 1200  # the other far ahead
    # a newcomer waits: the least window rule 6 allows, 180 frames and 20 of context (0.25 s)
    assert job_frames(tiny, pace=0.05, other_queued_s=0.0) == 200
    assert job_frames(tiny, pace=0.05, other_queued_s=0.5) == 280  # 0.7 of its 0.5 s: 0.35 s
    assert job_frames(tiny, pace=0.0, other_queued_s=30.0) == 0  # a free decoder: every chunk is one window


def test_a_bench_server_takes_at_most_one_sizing_variant() -> None:
    from bench.variants import SentenceJobsSizer, parse, strategies

    chosen = strategies(parse("round_robin, sentence_jobs"))
    assert isinstance(chosen.sizer, SentenceJobsSizer) and chosen.scheduler is not None
    with pytest.raises(ValueError, match="one_shot and sentence_jobs exclude each other"):
        parse("sentence_jobs,one_shot")


def test_the_wide_seams_variant_renders_each_window_whole_over_the_features_context(
    tiny: tuple[ModelDir, Any]
) -> None:
    """bench's wide_seams: the seam before the vocoder was cut from the decoder's body, priced so."""
    from bench.variants import WIDE_SEAMS_PROFILE, WideSeams, WideSeamsSynthesizer, parse, strategies
    from kokoro_server.engines.windows import CROSSFADE, FEATURE_CONTEXT
    from kokoro_server.model_dir import style_for

    chosen = strategies(parse("wide_seams"))
    assert chosen.synthesizer is WideSeamsSynthesizer and chosen.sizer == Sizer(WIDE_SEAMS_PROFILE)
    with pytest.raises(ValueError, match="no_halt and wide_seams exclude each other"):
        parse("no_halt,wide_seams")
    model, engine = tiny
    phonemes = "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst sˈɛntəns, sˈoʊ ɪt hɐz sˈɛvɹəl wˈɪndoʊz tə dɪkˈoʊd."
    style = style_for(model.voices["af_heart"], phonemes)
    wide = WideSeams(engine).begin(phonemes, style, 1.0)
    audio = [wide.step(30), wide.step(30), wide.rest()]
    assert [(w.lo, w.hi) for w in wide.windows[:2]] == [
        (0, 30 + CROSSFADE + FEATURE_CONTEXT), (30 - FEATURE_CONTEXT, 60 + CROSSFADE + FEATURE_CONTEXT)]
    assert sum(a.size for a in audio) == engine.synthesize(phonemes, style, 1.0).audio.size
