"""The fair scheduler: round-robin across owners, FIFO within one, cancel drops queued work."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kokoro_server.scheduler import FairScheduler

pytestmark = pytest.mark.kokoro


def test_owners_take_turns_and_keep_their_own_order() -> None:
    async def scenario() -> list[str]:
        scheduler = FairScheduler(workers=1)
        await scheduler.start()
        ran: list[str] = []
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)  # holds the worker while the queue fills
        futures = [scheduler.submit("a", lambda i=i: ran.append(f"a{i}")) for i in range(4)]
        futures += [scheduler.submit("b", lambda i=i: ran.append(f"b{i}")) for i in range(2)]
        futures += [scheduler.submit("c", lambda: ran.append("c0"))]
        gate.set()
        await asyncio.gather(blocker, *futures)
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario()) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]


def test_cancel_owner_drops_queued_jobs_and_others_still_run() -> None:
    async def scenario() -> tuple[list[str], int, list[bool]]:
        scheduler = FairScheduler(workers=1)
        await scheduler.start()
        ran: list[str] = []
        gate = threading.Event()
        blocker = scheduler.submit("warm", gate.wait)
        dropped = [scheduler.submit("gone", lambda i=i: ran.append(f"gone{i}")) for i in range(3)]
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
        scheduler = FairScheduler(workers=1)
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
        scheduler = FairScheduler(workers=1)
        await scheduler.start()
        loop_thread = threading.get_ident()
        ran_on = await scheduler.submit("x", threading.get_ident)
        await scheduler.stop()
        return ran_on != loop_thread

    assert asyncio.run(scenario())


def test_an_owner_that_leaves_costs_the_model_at_most_the_job_it_was_running() -> None:
    """Counted, as /ping's ``orphaned_jobs`` reports it: the job on the model when its owner left
    finishes and counts once; the owner's queued jobs never run; a job that finished before its
    owner left, or another owner's, does not count."""

    async def scenario() -> tuple[list[str], int, int, bool]:
        scheduler = FairScheduler(workers=1)
        await scheduler.start()
        ran: list[str] = []
        await scheduler.submit("left", lambda: ran.append("done-before-leaving"))
        started, gate = threading.Event(), threading.Event()

        def long_job() -> None:
            started.set()
            gate.wait(10)
            ran.append("on-the-model")

        scheduler.submit("left", long_job)
        queued = [scheduler.submit("left", lambda i=i: ran.append(f"queued{i}")) for i in range(3)]
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
