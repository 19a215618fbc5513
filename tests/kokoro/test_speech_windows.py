"""The job sizer through a real speech (real int8 weights): every window it decodes is the sizer's
answer to the listener's real queue as the job starts.

The scheduler's clock stands still unless a test moves it, so a listener's queue is all the audio
made for it so far, and the decoder cost is pinned: the windows depend on the text alone, and each
test can say which window the sizer (kokoro_server/sizing.py) must have given.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import real_audio as ra
from waiting import wait_until_async

from bench.variants import PerChunkSizer
from kokoro_server.lead import silent_lead
from kokoro_server.model_dir import style_for
from kokoro_server.scheduler import Scheduler
from kokoro_server.sizing import Cost, JobSizer, Profile, Situation, Sizer, sizes_alone
from kokoro_server.speech import Speech
from kokoro_server.synth import Synthesizer
from kokoro_server.tail import heard_end

pytestmark = pytest.mark.kokoro

LONG = ("Routers work best in the open, up high and near the middle of your home, because walls, "
        "mirrors and fish tanks all soak up the signal before it ever reaches the rooms where you need it most.")
SHORT = "Start with where the router sits."
NEXT = "Streaming speech means the first sentence plays while the rest is still being written."
VOICE = "jf_alpha"
LANG = ra.ENGLISH  # the texts are English, read so by the Japanese voice
COST = Cost(pace=0.6)  # the int8 model's decoder on two busy cores: a sentence is several windows


def _frames(text: str) -> tuple[int, int]:
    """The frames of ``text``'s one chunk, and how many of its first frames are not sent (lead.py)."""
    (phonemes,) = ra.phonemizer().phonemize(text, voice=VOICE, lang=LANG)
    decoding = ra.engine().begin(phonemes, style_for(ra.model().voices[VOICE], phonemes), 1.0)
    return decoding.frames, silent_lead(decoding.durations)


async def _session(body: Callable[[Synthesizer, list[float]], Any], *, sizer: JobSizer | None = None) -> Any:
    now = [0.0]
    scheduler = Scheduler(workers=1, clock=lambda: now[0])
    await scheduler.start()
    synth = Synthesizer(engine=ra.engine(), voices=ra.model().voices, scheduler=scheduler, default_voice=VOICE,
                        sizer=sizer)
    synth.keep_up(COST)
    try:
        return await body(synth, now)
    finally:
        await scheduler.stop()
        synth.close()


async def _say(synth: Synthesizer, text: str, *, owner: str = "session", after: Speech | None = None
               ) -> tuple[Speech, list[np.ndarray]]:
    speech = Speech(synth, owner=owner, pieces=[text], voice=VOICE, speed=1.0, after=after, lang=LANG)
    return speech, [c.synthesis.audio async for c in speech]


def test_a_sentence_spoken_while_earlier_audio_plays_is_one_window_exactly_as_one_shot() -> None:
    """Rule 3: the listener still has the long sentence's audio to hear (the clock stands still),
    which covers the next sentence's decoding: one window, the one-shot render. Another session's
    listener, or this one once it has heard everything (the clock a minute on), starts small again."""
    (phonemes,) = ra.phonemizer().phonemize(NEXT, voice=VOICE, lang=LANG)
    style = style_for(ra.model().voices[VOICE], phonemes)
    one_shot = ra.engine().synthesize(phonemes, style, 1.0)
    lead = silent_lead(one_shot.durations)
    fresh = ra.engine().begin(phonemes, style, 1.0)
    fresh_windows = ra.as_sent([fresh.step(size) for size in sizes_alone(fresh.frames, Sizer(), COST, lead=lead)],
                               lead)  # the silence around the speech is not sent
    assert len(fresh_windows) >= 2 and lead > 0

    async def body(synth: Synthesizer, now: list[float]) -> tuple[list[np.ndarray], ...]:
        first, long_windows = await _say(synth, LONG)
        _, carried = await _say(synth, NEXT, after=first)
        _, other_owner = await _say(synth, NEXT, owner="another session")  # its listener has nothing queued
        now[0] += 60.0  # the listener has heard everything
        _, restarted = await _say(synth, NEXT)
        return long_windows, carried, other_owner, restarted

    long_windows, carried, other_owner, restarted = asyncio.run(_session(body))
    assert len(long_windows) >= 2
    assert len(carried) == 1
    ra.assert_sent(carried, [heard_end(one_shot.audio[lead * 600:], 600)])
    for windows in (other_owner, restarted):
        ra.assert_sent(windows, fresh_windows)


def test_a_sentence_after_earlier_audio_is_sized_from_what_its_listener_still_has_to_hear() -> None:
    """The CPU demo's stutter at its first sentence boundary: the next utterance's first window is
    what the sizer gives the audio its listener has queued when the job starts (the clock moved on:
    2.3 s left), not what the speech made before it."""
    (frames, lead), queued_s = _frames(NEXT), 2.3

    async def body(synth: Synthesizer, now: list[float]) -> list[int]:
        first, windows = await _say(synth, LONG)
        now[0] = sum(len(w) for w in windows) / 24000 - queued_s  # all but the last 2.3 s heard
        second = Speech(synth, owner="session", pieces=[NEXT], voice=VOICE, speed=1.0, after=first, lang=LANG)
        decodings = [c.decoding async for c in second]
        assert decodings[0] is not None  # cut: its decoding holds every window decoded
        return [w.end - w.start for w in decodings[0].windows]

    sizes = asyncio.run(_session(body))
    assert sizes[0] == Sizer().next_window(Situation(left=frames, queued_s=queued_s, cost=COST, lead=lead)) < frames
    assert sum(sizes) == frames


def test_a_window_holds_the_engine_long_only_while_no_other_listener_waits() -> None:
    """Rule 6: a sentence whose listener has 0.2 s left starts before a newcomer (its deadline is
    sooner); while that newcomer waits for its first audio, the window is cut to rule 6's floor (a
    profile whose floor lies under this window's size alone: the default's is 3 s at this pace)."""
    (long_frames, lead), queued = _frames(LONG), 0.2
    sizer = Sizer(Profile(contention_waste=0.5))

    async def first_window(*, other_waits: bool) -> int:
        async def body(synth: Synthesizer, now: list[float]) -> int:
            scheduler = synth.scheduler
            await scheduler.submit("session", lambda: None, audio_s=lambda _: queued)  # 0.2 s left to hear
            gate = threading.Event()
            held = scheduler.submit("gate", lambda: gate.wait(30))  # both jobs below queue behind it
            await wait_until_async(lambda: asyncio.sleep(0, scheduler.running))
            speech = aiter(Speech(synth, owner="session", pieces=[LONG], voice=VOICE, speed=1.0, lang=LANG))
            assert isinstance(speech, AsyncGenerator)  # Speech.__aiter__ is an async generator: it closes
            first = asyncio.ensure_future(anext(speech))
            await wait_until_async(lambda: asyncio.sleep(0, scheduler.queued))  # its G2P done, its job queued
            newcomer = scheduler.submit("newcomer", lambda: None) if other_waits else None
            gate.set()
            await held
            size = len((await first).synthesis.audio) // 600
            if newcomer is not None:
                await newcomer
            await speech.aclose()
            return size

        found: int = await _session(body, sizer=sizer)
        return found

    alone, shared = asyncio.run(first_window(other_waits=False)), asyncio.run(first_window(other_waits=True))
    # alone, its silence before the speech is decoded and not sent; while the newcomer waits, it is
    # sent (lead.py: the cheapest buffer then)
    assert alone + lead == sizer.next_window(Situation(left=long_frames, queued_s=queued, cost=COST, lead=lead))
    assert shared == sizer.next_window(Situation(left=long_frames, queued_s=queued, cost=COST, others_s=0.0))
    assert shared < alone


def test_the_bench_variant_sizes_each_sentence_as_if_nothing_were_queued() -> None:
    async def body(synth: Synthesizer, now: list[float]) -> list[np.ndarray]:
        speech = Speech(synth, owner="o", pieces=[LONG, NEXT], voice=VOICE, speed=1.0, lang=LANG)
        return [c.synthesis.audio async for c in speech]

    ours = asyncio.run(_session(body))
    per_chunk = asyncio.run(_session(body, sizer=PerChunkSizer()))  # bench's windowed_per_chunk
    assert len(per_chunk) > len(ours)  # its second sentence starts small again instead of one window


def test_a_listener_the_decoder_fell_behind_for_gets_windows_worth_a_call_a_newcomer_a_small_first() -> None:
    """Rule 6's floor for a listener that has heard all its audio (ran dry) while a newcomer waits:
    no queue, like a newcomer's, but not the small first window rule 4 gives a newcomer; under
    overload such windows are mostly context, which every listener then waits for."""
    long_frames, _ = _frames(LONG)

    async def first_window(*, ran_dry: bool) -> int:
        async def body(synth: Synthesizer, now: list[float]) -> int:
            scheduler = synth.scheduler
            if ran_dry:
                await scheduler.submit("session", lambda: None, audio_s=lambda _: 0.2)  # 0.2 s to hear
            gate = threading.Event()
            held = scheduler.submit("gate", lambda: gate.wait(30))
            await wait_until_async(lambda: asyncio.sleep(0, scheduler.running))
            now[0] = 1.0  # all of it heard
            speech = aiter(Speech(synth, owner="session", pieces=[LONG], voice=VOICE, speed=1.0, lang=LANG))
            assert isinstance(speech, AsyncGenerator)
            first = asyncio.ensure_future(anext(speech))
            await wait_until_async(lambda: asyncio.sleep(0, scheduler.queued))
            newcomer = scheduler.submit("newcomer", lambda: None)
            gate.set()
            await held
            size = len((await first).synthesis.audio) // 600  # all of it sent: the newcomer waits (lead.py)
            await newcomer
            await speech.aclose()
            return size

        found: int = await _session(body)
        return found

    dry, new = asyncio.run(first_window(ran_dry=True)), asyncio.run(first_window(ran_dry=False))
    situation = Situation(left=long_frames, queued_s=0.0, cost=COST, others_s=0.0)
    assert new == Sizer().next_window(situation)
    assert dry == Sizer().next_window(replace(situation, ran_dry=True))
    assert new < dry
