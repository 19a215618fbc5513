"""One model, many sessions: a fair queue in front of the engine.

The model runs one chunk (one sentence, at most 510 phonemes) at a time, off the event loop in a
worker thread. Jobs are queued per owner (a WebSocket session or an HTTP request) and the worker
takes owners in turn, so one client's long paragraph holds another client's first sentence back
by at most one chunk, never by its whole length. Cancelling an owner drops its queued jobs at
once; a chunk already on the model finishes (torch cannot be interrupted) and its audio is
discarded, so a client that left costs the model at most one chunk. ``orphaned`` counts those
chunks (finished for an owner that had already gone), so the claim is measured, not assumed.

Ownership: the engine is used by the worker thread only (``warm_up`` runs before the first job),
and ``stop`` waits for the chunk in flight, so the engine is never freed under a running job.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Hashable

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Job:
    owner: Hashable
    fn: Callable[[], Any]
    future: asyncio.Future[Any]


class FairScheduler:
    """Round-robin across owners, FIFO within an owner, ``workers`` jobs at a time."""

    def __init__(self, *, workers: int = 1) -> None:
        self._workers = workers
        self._queues: dict[Hashable, collections.deque[_Job]] = {}
        self._turns: collections.deque[Hashable] = collections.deque()
        self._wakeup: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self.running = 0
        self.completed = 0
        self.orphaned = 0  # jobs that finished after their owner left (forget_owner)
        self._in_flight: collections.Counter[Hashable] = collections.Counter()
        self._gone: set[Hashable] = set()

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self._queues.values())

    @property
    def idle(self) -> bool:
        return self.running == 0 and self.queued == 0

    async def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="kokoro-engine")
        self._tasks = [asyncio.create_task(self._work(), name=f"engine-worker-{i}") for i in range(self._workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for owner in list(self._queues):
            self.cancel_owner(owner)
        if self._executor is not None:  # the chunk on the model finishes before the engine may go
            await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)

    def submit(self, owner: Hashable, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        """Queue ``fn`` for ``owner``; the future resolves with its result once the model ran it."""
        if self._wakeup is None:
            raise RuntimeError("scheduler not started")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        queue = self._queues.get(owner)
        if queue is None:
            queue = self._queues[owner] = collections.deque()
            self._turns.append(owner)
        queue.append(_Job(owner, fn, future))
        self._wakeup.set()
        return future

    def cancel_owner(self, owner: Hashable) -> int:
        """Drop every queued job of ``owner``; return how many were dropped."""
        queue = self._queues.pop(owner, None)
        if queue is None:
            return 0
        try:
            self._turns.remove(owner)
        except ValueError:
            pass
        for job in queue:
            job.future.cancel()
        return len(queue)

    def forget_owner(self, owner: Hashable) -> None:
        """The owner has left (session closed, request ended): drop its queue; a job of its that is
        on the model now still finishes, and is counted in ``orphaned``."""
        self.cancel_owner(owner)
        if self._in_flight[owner]:
            self._gone.add(owner)

    def _next_job(self) -> _Job | None:
        while self._turns:
            owner = self._turns.popleft()
            queue = self._queues[owner]
            job = queue.popleft()
            if queue:
                self._turns.append(owner)
            else:
                del self._queues[owner]
            if not job.future.cancelled():
                return job
        return None

    async def _work(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            job = self._next_job()
            if job is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            self.running += 1
            self._in_flight[job.owner] += 1
            try:
                result = await loop.run_in_executor(self._executor, job.fn)
            except asyncio.CancelledError:
                job.future.cancel()
                raise
            except Exception as exc:  # reported to whoever waits; the worker keeps going
                if not job.future.done():
                    job.future.set_exception(exc)
            else:
                if not job.future.done():
                    job.future.set_result(result)
            finally:
                self.running -= 1
                self.completed += 1
                self._finished(job.owner)

    def _finished(self, owner: Hashable) -> None:
        self._in_flight[owner] -= 1
        if owner in self._gone:
            self.orphaned += 1
        if not self._in_flight[owner]:
            del self._in_flight[owner]
            self._gone.discard(owner)
