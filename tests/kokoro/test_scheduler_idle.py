"""The scheduler when its queue runs dry: idle hooks (the pace re-measure) run once per burst, the
freed memory is handed back once per burst, not before the queue has stayed dry a while, and
``settled`` (what /ping reports, and what the soak waits for) holds only after that trim. A server
waits KOKORO_MEMORY_TRIM_AFTER_S (30 s by default), not the turn of a conversation."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from kokoro_harness import Server, start_server
from waiting import wait_until, wait_until_async

from kokoro_server.scheduler import Scheduler

pytestmark = pytest.mark.kokoro

IDLE_AFTER_S = 0.05


async def trims_reach(scheduler: Scheduler, count: int) -> int:
    """Wait (bounded) until the worker has trimmed ``count`` times and settled; the count seen."""
    async def probe() -> tuple[int, bool]:
        return scheduler.trims, scheduler.settled

    trims, _ = await wait_until_async(probe, until=lambda seen: seen == (count, True), timeout=5, interval=0.01)
    return trims


def failing_hook() -> None:
    1 / 0  # noqa: B018 (the point: it raises)


def test_idle_hooks_run_once_per_burst_before_the_trim_and_a_failing_one_is_contained() -> None:
    async def scenario() -> list[str]:
        scheduler = Scheduler(workers=1, idle_after_s=IDLE_AFTER_S)
        ran: list[str] = []
        scheduler.on_idle(lambda: ran.append("hook"))
        scheduler.on_idle(failing_hook)  # logged; the worker goes on
        await scheduler.start()
        for burst in (1, 2):
            await scheduler.submit("s", lambda: ran.append("job"))
            await trims_reach(scheduler, burst)
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario()) == ["job", "hook", "job", "hook"]


def test_an_idle_queue_hands_freed_memory_back_once_per_burst() -> None:
    async def scenario() -> list[int]:
        scheduler = Scheduler(workers=1, idle_after_s=IDLE_AFTER_S)
        await scheduler.start()
        seen = [scheduler.trims]  # nothing ran yet: nothing to give back
        await asyncio.gather(*(scheduler.submit("s", lambda: bytearray(1 << 20)) for _ in range(3)))
        seen.append(await trims_reach(scheduler, 1))
        # Idle without new work: watch a while for a second trim that must not come.
        async def trims() -> int:
            return scheduler.trims

        seen.append(await wait_until_async(trims, until=lambda count: count != 1, timeout=0.1, interval=0.01))
        await scheduler.submit("s", lambda: None)
        seen.append(await trims_reach(scheduler, 2))
        await scheduler.stop()
        return seen

    assert asyncio.run(scenario()) == [0, 1, 1, 2]


def test_settled_waits_for_the_idle_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    """/ping's ``settled``: idle is not enough while the trim that hands freed memory back runs
    (the soak reads the server's RSS only once it is settled)."""
    import kokoro_server.scheduler as module

    entered, gate = threading.Event(), threading.Event()

    def held_trim() -> None:  # the trim, held until the test has looked
        entered.set()
        gate.wait(10)

    monkeypatch.setattr(module, "release_free_memory", held_trim)

    async def scenario() -> list[bool]:
        scheduler = Scheduler(workers=1, idle_after_s=IDLE_AFTER_S)
        await scheduler.start()
        seen = [scheduler.settled]  # nothing ran yet: nothing to hand back
        await scheduler.submit("s", lambda: None)
        await asyncio.to_thread(entered.wait, 10)
        seen += [scheduler.idle, scheduler.settled]
        gate.set()
        await trims_reach(scheduler, 1)
        seen.append(scheduler.settled)
        await scheduler.stop()
        return seen

    assert asyncio.run(scenario()) == [True, True, False, True]


def test_work_that_comes_while_the_queue_is_briefly_dry_does_not_wait_for_the_trim() -> None:
    """A request sent as the last one ends (or the next answer after a barge-in) runs before the
    idle hooks and the trim: they wait until the queue has stayed dry for ``idle_after_s``."""
    async def scenario() -> list[object]:
        scheduler = Scheduler(workers=1, idle_after_s=0.5)
        ran: list[object] = []
        scheduler.on_idle(lambda: ran.append("hook"))
        await scheduler.start()
        for job in range(5):  # each one a moment after the one before it ended
            await scheduler.submit("s", functools.partial(ran.append, job))
            await asyncio.sleep(0.02)
        ran.append(("trims", scheduler.trims, scheduler.settled))
        ran.append(("trims", await trims_reach(scheduler, 1)))
        await scheduler.stop()
        return ran

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4, ("trims", 0, False), "hook", ("trims", 1)]


def test_the_idle_delay_is_checked() -> None:
    with pytest.raises(ValueError, match="idle_after_s"):
        Scheduler(idle_after_s=-1.0)


def spoken(server: Server) -> float:
    """Speak a short answer through the OpenAI route; when its last byte came (monotonic)."""
    body = {"model": "kokoro", "input": "Sure, one moment.", "voice": "af_heart", "response_format": "pcm"}
    response = httpx.post(f"{server.http}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200 and response.content, response.text[:200]
    return time.monotonic()


def settled(status: dict[str, Any]) -> bool:
    return bool(status["settled"])


def test_a_server_hands_memory_back_once_idle_for_the_configured_time(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    trim_after_s = 0.5
    running = start_server(tiny_model, tmp_path_factory.mktemp("trim") / "server.log",
                           env={"KOKORO_WARMUP": "0", "KOKORO_MEMORY_TRIM_AFTER_S": str(trim_after_s)})
    try:
        ended = spoken(running)
        assert wait_until(running.diagnostics, until=settled, timeout=20)["settled"]
        assert time.monotonic() - ended >= trim_after_s
    finally:
        running.stop()


def test_by_default_the_next_turn_of_a_conversation_finds_the_memory_the_last_one_freed(server: Server) -> None:
    """A caller speaks for seconds between two answers: the server must not trim meanwhile, or the
    next answer faults in its working set again (docs/throughput.md, "The idle trim")."""
    spoken(server)
    watched = wait_until(server.diagnostics, until=settled, timeout=2.0, interval=0.1)  # a while, not 30 s
    assert (watched["queued"], watched["running"], watched["settled"]) == (0, 0, False)
