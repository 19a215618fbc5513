"""The scheduler: deadline-first across owners, FIFO within one, cancel drops queued work; the round-robin
variant the bench compares it with (bench/variants.py)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hand_clock import HandClock

from bench.variants import RoundRobinScheduler
from kokoro_server.scheduler import Scheduler

pytestmark = pytest.mark.kokoro


def noting(ran: list[str], name: str, audio_s: float | None = None) -> Callable[[], float | None]:
    """A job that notes its name in ``ran`` and returns ``audio_s`` (its seconds of audio)."""
    def job() -> float | None:
        ran.append(name)
        return audio_s
    return job


def test_round_robin_owners_take_turns_and_keep_their_own_order() -> None:
    async def scenario() -> list[str]:
        scheduler = RoundRobinScheduler(workers=1)
        await scheduler.start()
        ran: list[str] = []
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)  # holds the worker while the queue fills
        futures = [scheduler.submit("a", noting(ran, f"a{i}")) for i in range(4)]
        futures += [scheduler.submit("b", noting(ran, f"b{i}")) for i in range(2)]
        futures += [scheduler.submit("c", lambda: ran.append("c0"))]
        gate.set()
        await asyncio.gather(blocker, *futures)
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario()) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]


def test_cancel_owner_drops_queued_jobs_and_others_still_run() -> None:
    async def scenario() -> tuple[list[str], int, list[bool]]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        ran: list[str] = []
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)
        dropped = [scheduler.submit("gone", noting(ran, f"gone{i}")) for i in range(3)]
        kept = scheduler.submit("stay", lambda: ran.append("stay"))
        count = scheduler.cancel_owner("gone")
        gate.set()
        await asyncio.gather(blocker, kept)
        idle = scheduler.idle
        await scheduler.stop()
        return ran, count, [f.cancelled() for f in dropped] + [idle]

    ran, count, flags = asyncio.run(scenario())
    assert ran == ["stay"] and count == 3 and all(flags)


def test_a_failing_job_reports_to_its_waiter_and_the_worker_goes_on() -> None:
    async def scenario() -> tuple[str, int]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()

        def boom() -> None:
            raise ValueError("engine exploded")

        failing = scheduler.submit("x", boom)
        fine = scheduler.submit("x", lambda: 42)
        with pytest.raises(ValueError) as error:
            await failing
        result = await fine
        await scheduler.stop()
        return str(error.value), result

    assert asyncio.run(scenario()) == ("engine exploded", 42)


def test_jobs_run_off_the_event_loop() -> None:
    async def scenario() -> bool:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        loop_thread = threading.get_ident()
        ran_on: int = await scheduler.submit("x", threading.get_ident)
        await scheduler.stop()
        return ran_on != loop_thread

    assert asyncio.run(scenario())


def test_an_owner_that_leaves_costs_the_model_at_most_the_job_it_was_running() -> None:
    """Counted, as /ping's ``orphaned_jobs`` reports it: the job on the model when its owner left
    finishes and counts once; the owner's queued jobs never run; a job that finished before its
    owner left, or another owner's, does not count."""

    async def scenario() -> tuple[list[str], int, int, bool]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        ran: list[str] = []
        await scheduler.submit("left", lambda: ran.append("done-before-leaving"))
        started, gate = threading.Event(), threading.Event()

        def long_job() -> None:
            started.set()
            gate.wait(10)
            ran.append("on-the-model")

        scheduler.submit("left", long_job)
        queued = [scheduler.submit("left", noting(ran, f"queued{i}")) for i in range(3)]
        other = scheduler.submit("stays", lambda: ran.append("other"))
        await asyncio.to_thread(started.wait, 10)
        scheduler.forget_owner("left")
        gate.set()
        await other
        orphaned = scheduler.orphaned
        scheduler.forget_owner("stays")  # nothing of it is running: nothing counted
        await scheduler.stop()
        return ran, orphaned, scheduler.orphaned, all(job.cancelled() for job in queued)

    ran, orphaned, final, queued_dropped = asyncio.run(scenario())
    assert ran == ["done-before-leaving", "on-the-model", "other"] and queued_dropped
    assert orphaned == 1 and final == 1


# ---- deadline first ------------------------------------------------------------------------------

@dataclass
class _Made:
    name: str
    seconds: float  # audio the job made for its owner's listener


# Each case: jobs submitted while the worker is held, as (owner, name, seconds of audio the job
# makes, clock advance before submitting), and the order the worker must run them in. The clock
# stands still while jobs run; a first window is due DEFAULT_FIRST_AUDIO_S (0.5 s) after it is asked for.
DEADLINE_CASES = {
    "first windows of new sessions pass a session that is seconds ahead": (
        [("ahead", "a0", 5.0, 0.0), ("ahead", "a1", 5.0, 0.0), ("new", "n0", 0.5, 0.1), ("new2", "m0", 0.5, 0.1)],
        ["a0", "n0", "m0", "a1"],
    ),
    "with nothing playing, owners go in submission order": (
        [("x", "x0", 0.0, 0.0), ("y", "y0", 0.0, 0.0), ("x", "x1", 0.0, 0.0), ("z", "z0", 0.0, 0.0)],
        ["x0", "y0", "x1", "z0"],
    ),
    "a listener running dry within the first-audio grace goes before a new session's first window": (
        [("playing", "p0", 0.3, 0.0), ("playing", "p1", 0.3, 0.0), ("playing", "p2", 0.3, 0.0),
         ("new", "n0", 0.5, 0.0)],
        ["p0", "p1", "n0", "p2"],  # p1 is due at 100.3, n0 at 100.5, p2 at 100.6
    ),
    "the listener that runs dry first goes first": (
        [("long", "l0", 3.0, 0.0), ("short", "s0", 0.5, 0.0), ("long", "l1", 1.0, 0.0), ("short", "s1", 0.5, 0.0),
         ("short", "s2", 0.5, 0.0)],
        ["l0", "s0", "s1", "s2", "l1"],
    ),
}


@pytest.mark.parametrize("jobs,expected", DEADLINE_CASES.values(), ids=list(DEADLINE_CASES))
def test_deadline_first_runs_the_listener_closest_to_silence(
    jobs: list[tuple[str, str, float, float]], expected: list[str]
) -> None:
    async def scenario() -> list[str]:
        clock = HandClock()
        scheduler = Scheduler(workers=1, clock=clock)
        await scheduler.start()
        ran: list[str] = []
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)
        futures = []
        for owner, name, seconds, advance in jobs:
            clock.now += advance

            def job(name: str = name, seconds: float = seconds) -> _Made:
                ran.append(name)
                return _Made(name, seconds)

            futures.append(scheduler.submit(owner, job, audio_s=lambda made: made.seconds))
        gate.set()
        await asyncio.gather(blocker, *futures)
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario()) == expected


@pytest.mark.parametrize(("first_audio_s", "expected"), [(0.0, ["n0", "p1"]), (0.2, ["n0", "p1"]),
                                                       (0.5, ["p1", "n0"])])
def test_the_first_audio_grace_decides_between_a_new_session_and_a_listener_near_silence(
        first_audio_s: float, expected: list[str]) -> None:
    """The playing listener has 0.3 s of audio left when a new session asks for its first window."""
    async def scenario() -> list[str]:
        clock = HandClock()
        scheduler = Scheduler(workers=1, clock=clock, first_audio_s=first_audio_s)
        await scheduler.start()
        ran: list[str] = []
        await scheduler.submit("playing", lambda: 0.3, audio_s=float)
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)
        later = [scheduler.submit("playing", noting(ran, "p1", 0.3), audio_s=float),
                 scheduler.submit("new", noting(ran, "n0", 0.5), audio_s=float)]
        gate.set()
        await asyncio.gather(blocker, *later)
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario()) == expected


def test_queued_audio_is_what_the_owners_jobs_made_less_what_its_listener_has_heard() -> None:
    async def scenario() -> list[float]:
        clock = HandClock()
        scheduler = Scheduler(workers=1, clock=clock)
        await scheduler.start()
        seen = [scheduler.queued_audio_s("a")]  # never seen
        await scheduler.submit("a", lambda: 2.0, audio_s=float)
        await scheduler.submit("a", lambda: 1.5, audio_s=float)
        seen += [scheduler.queued_audio_s("a"), scheduler.queued_audio_s("b")]
        clock.now += 3.0
        seen.append(scheduler.queued_audio_s("a"))
        clock.now += 1.0  # all heard
        seen.append(scheduler.queued_audio_s("a"))
        await scheduler.stop()
        return seen

    assert asyncio.run(scenario()) == [0.0, 3.5, 0.0, 0.5, 0.0]


def test_a_job_is_never_due_later_than_its_slack_so_no_session_starves() -> None:
    async def scenario() -> tuple[list[str], list[float | None]]:
        clock = HandClock()
        scheduler = Scheduler(workers=1, clock=clock, max_slack_s=2.0)
        await scheduler.start()
        ran: list[str] = []
        # "far" has 60 s of audio buffered; its next job is still due within max_slack_s
        await scheduler.submit("far", noting(ran, "far0", 60.0), audio_s=float)
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)
        far = scheduler.submit("far", noting(ran, "far1", 1.0), audio_s=float)
        deadlines = [scheduler.deadline("far")]
        later = []
        for i in range(3):  # sessions arriving after far1's slack ran out come after it
            clock.now += 1.0
            later.append(scheduler.submit(f"new{i}", noting(ran, f"new{i}", 0.5), audio_s=float))
        gate.set()
        await asyncio.gather(blocker, far, *later)
        await scheduler.stop()
        return ran, deadlines

    ran, deadlines = asyncio.run(scenario())
    assert deadlines == [102.0]  # submitted at 100.0, capped at 2 s of slack although 60 s are buffered
    assert ran == ["far0", "new0", "far1", "new1", "new2"]


def test_a_first_audio_grace_past_the_slack_is_refused() -> None:
    with pytest.raises(ValueError, match="first_audio_s"):
        Scheduler(max_slack_s=2.0, first_audio_s=3.0)
    with pytest.raises(ValueError, match="first_audio_s"):
        Scheduler(first_audio_s=-0.1)


def test_the_server_has_no_policy_setting() -> None:
    """Round-robin is a bench variant (a subclass), not something the server can be set to."""
    with pytest.raises(TypeError):
        Scheduler(policy="round_robin")  # type: ignore[call-arg]


@pytest.mark.parametrize("hook,expected", [
    ("then", ["p0", "p1", "a1"]),  # queued in the hook: the very next pick sees it and it is due first
    ("done_callback", ["p0", "a1", "p1"]),  # queued from the future's callback: the pick went to "ahead"
])
def test_a_follow_up_queued_in_then_competes_for_the_next_pick(hook: str, expected: list[str]) -> None:
    """A session's next window is queued only when its window before is done (the decoder state is
    sequential). Queued from ``then`` it takes part in the next pick; queued any later, a job of a
    session that is seconds ahead starts first and the listener near silence waits for all of it."""

    async def scenario() -> list[str]:
        clock = HandClock()
        scheduler = Scheduler(workers=1, clock=clock)
        await scheduler.start()
        ran: list[str] = []
        await scheduler.submit("ahead", noting(ran, "a0", 10.0), audio_s=float)
        followed: list[asyncio.Future[float]] = []

        def follow(_: float) -> None:
            followed.append(scheduler.submit("playing", noting(ran, "p1", 2.0), audio_s=float))

        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)
        first = scheduler.submit("playing", noting(ran, "p0", 0.5), audio_s=float,
                                 then=follow if hook == "then" else None)
        if hook == "done_callback":
            first.add_done_callback(lambda f: follow(f.result()))
        ahead = scheduler.submit("ahead", noting(ran, "a1", 10.0), audio_s=float)
        gate.set()
        await asyncio.gather(blocker, first, ahead)
        await asyncio.gather(*followed)
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario())[1:] == expected


@pytest.mark.parametrize("policy", [Scheduler, RoundRobinScheduler])
def test_with_two_workers_one_owners_jobs_still_run_one_at_a_time(policy: type[Scheduler]) -> None:
    """Each owner's jobs share a decoder state, so they never overlap, while other owners use the
    second worker."""

    async def scenario() -> tuple[dict[str, int], list[str]]:
        scheduler = policy(workers=2)
        await scheduler.start()
        lock = threading.Lock()
        running: dict[str, int] = {}
        most: dict[str, int] = {}
        order: list[str] = []

        def job(owner: str, name: str) -> None:
            with lock:
                running[owner] = running.get(owner, 0) + 1
                most[owner] = max(most.get(owner, 0), running[owner])
                order.append(name)
            threading.Event().wait(0.02)
            with lock:
                running[owner] -= 1

        futures = [scheduler.submit(owner, functools.partial(job, owner, f"{owner}{i}"))
                   for i in range(4) for owner in ("a", "b")]
        await asyncio.gather(*futures)
        await scheduler.stop()
        return most, order

    most, order = asyncio.run(scenario())
    assert most == {"a": 1, "b": 1}
    assert [n for n in order if n[0] == "a"] == ["a0", "a1", "a2", "a3"]
