"""The deadline scheduler when the engine is behind: while a playing listener has run dry, owners take turns."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest
from hand_clock import HandClock

from kokoro_server.scheduler import Scheduler

pytestmark = pytest.mark.kokoro


# "playing" and "quiet" made 0.3 and 0.2 s of audio, "ahead" 5 s, all at 100.0. Then, with the
# worker held, each asks for one more job in this order: "playing", "ahead", a "new" session's
# first window (due 0.5 s after it asks), "quiet". A job makes 0.5 s of audio; the clock stands
# still while jobs run, so a listener that got a job is no longer dry.
CASES = {
    "no listener has run dry: deadline order": (100.0, ["q1", "p1", "n0", "a1"]),
    # at 101.0 both have run dry; after p1 "quiet" still has, so turns go on
    "listeners ran dry: one job each, in the order they asked": (101.0, ["p1", "a1", "n0", "q1"]),
}


def noting(ran: list[str], name: str, audio_s: float | None = None) -> Callable[[], float | None]:
    """A job that notes its name in ``ran`` and returns ``audio_s`` (its seconds of audio)."""
    def job() -> float | None:
        ran.append(name)
        return audio_s
    return job


@pytest.mark.parametrize("asked_at,expected", CASES.values(), ids=list(CASES))
def test_while_a_playing_listener_is_dry_owners_take_turns(asked_at: float, expected: list[str]) -> None:
    async def scenario() -> list[str]:
        clock = HandClock()
        scheduler = Scheduler(workers=1, clock=clock)
        await scheduler.start()
        ran: list[str] = []
        await scheduler.submit("playing", lambda: 0.3, audio_s=float)  # plays until 100.3
        await scheduler.submit("quiet", lambda: 0.2, audio_s=float)  # until 100.2
        await scheduler.submit("ahead", lambda: 5.0, audio_s=float)  # until 105.0
        clock.now = asked_at
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)
        later = [scheduler.submit(owner, noting(ran, name, 0.5), audio_s=float)
                 for owner, name in (("playing", "p1"), ("ahead", "a1"), ("new", "n0"), ("quiet", "q1"))]
        gate.set()
        await asyncio.gather(blocker, *later)
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario()) == expected


def test_ran_dry_tells_a_listener_the_engine_fell_behind_for_from_one_not_started() -> None:
    """The job sizer keeps a dry listener's windows worth their call (sizing.py, rule 6), but lets a
    newcomer's first window be small: both have no audio queued."""
    async def scenario() -> list[bool]:
        clock = HandClock()
        scheduler = Scheduler(workers=1, clock=clock)
        await scheduler.start()
        seen = [scheduler.ran_dry("a")]  # never seen
        await scheduler.submit("a", lambda: 1.0, audio_s=float)  # plays until 101.0
        seen.append(scheduler.ran_dry("a"))
        gate = threading.Event()
        blocker = scheduler.submit("b", gate.wait)
        waiting = scheduler.submit("a", lambda: 1.0, audio_s=float)
        clock.now += 2.0  # heard it all, its next job still queued behind "b"
        seen += [scheduler.ran_dry("a"), scheduler.ran_dry("b")]
        scheduler.cancel_owner("a")  # a barge-in: what comes next is a new answer
        seen.append(scheduler.ran_dry("a"))
        gate.set()
        await blocker
        await asyncio.gather(waiting, return_exceptions=True)
        await scheduler.stop()
        return seen

    assert asyncio.run(scenario()) == [False, False, True, False, False]
