"""One model, many sessions: a deadline-first queue in front of the engine.

The model runs one job at a time (a window of frames, or a whole chunk when decoding in one shot)
off the event loop in a worker thread. Jobs are queued per owner (a WebSocket session or an HTTP
request), FIFO within an owner, one at a time (its windows share a decoder state). A job's
``then`` hook runs as soon as it finished, before the next pick: an owner queues its next window
there, so that pick weighs it. Which owner goes next: the owner whose listener runs out of audio first.
  Each finished job adds its audio to the owner's account: the listener runs out at ``max(now, runs_out) + audio``.
  An owner with nothing playing is due ``first_audio_s`` after its job was submitted: a session 5 s
  ahead waits for a new session's first window, but one whose listener is about to run dry goes
  first (a gap in speech already playing costs more than a first audio that much later). A job's
  deadline is capped at its submission time plus ``max_slack_s``, so every deadline lies in
  [submitted, submitted + max_slack_s]: only jobs submitted before this job's cap can pass it, and
  no owner starves. While a listener already playing has run dry with a job queued (the engine is
  behind: overload), owners take turns instead, one job each in the order they asked: deadline-
  first would serve whoever is furthest behind and keep them all behind, while turns let a
  session whose windows hold seconds of audio keep ahead. Paired runs
  (bench/results/overload/hybrid-*.json): 4 sessions 0.78 and 2.35 s of stall per audio minute
  against 2.56 and 4.24 s, 8 sessions 36.9 and 46.1 against 49.3 and 59.5 s, none at 2 either
  way; p95 first audio at 8 about 1 s later. (Turns always, the earlier policy, is a bench
  variant now: bench/variants.py's RoundRobinScheduler, passed to create_app.)

Cancelling an owner drops its queued jobs at once. A job already on the model is not the
scheduler's to stop: whoever cancels the job's future stops it there (the synthesizer halts it
between two of the model's steps: engines/halt.py) and its result is discarded, so a client that
left, or a barge-in, costs at most what is left of one model step. ``orphaned`` counts jobs that
ended for an owner that had already gone.

When the queue has stayed dry for ``idle_after_s`` after work, a worker runs the idle hooks
(``on_idle``: the synthesizer re-measures the decoder pace there) and hands the memory the jobs
freed back to the system (memory.py), so an idle server's resident size does not keep its last
burst's peak. Only once the server is idle, not between the turns of a conversation: the next
request faults in again every page the trim gave back, and a caller's next answer comes seconds
after the last (DEFAULT_IDLE_AFTER_S). Never the moment the queue runs dry: a request sent as the
last one ends would wait behind the trim itself (10-15 ms of a core on the tiny torch model).

Ownership: the engine is used by the worker thread only (``warm_up`` runs before the first job),
and ``stop`` waits for the job in flight, so the engine is never freed under a running job.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

from .memory import release_free_memory

log = logging.getLogger(__name__)

DEFAULT_MAX_SLACK_S = 10.0
DEFAULT_IDLE_AFTER_S = 30.0
"""How long the queue stays dry after work before the idle hooks and the memory trim run
(KOKORO_MEMORY_TRIM_AFTER_S). At 1 s, every answer of a conversation came after a trim and faulted
its working set in anew: bench/results/memory_trim.json (docs/throughput.md, "The idle trim")."""
DEFAULT_FIRST_AUDIO_S = 0.5
"""How long after its submission a job of an owner with nothing playing is due (KOKORO_FIRST_AUDIO_S).
Two sessions arriving at random on 2 CPU cores, paired runs: with 0 (a first window due at once)
5 of 6 runs stalled, up to 0.4 s per audio minute; with 0.5, 1 of 6 (0.01 s), and p95 first audio
no later (docs/models.md)."""


@dataclass(eq=False)
class _Job:
    owner: Hashable
    fn: Callable[[], Any]
    future: asyncio.Future[Any]
    submitted: float
    seq: int
    audio_s: Callable[[Any], float] | None
    then: Callable[[Any], None] | None
    at_start: Callable[[], None] | None = None


@dataclass(eq=False)
class _Owner:
    jobs: collections.deque[_Job] = field(default_factory=collections.deque)
    runs_out: float | None = None  # when this owner's listener has played all audio made so far


class Scheduler:
    """Deadline-first across owners, FIFO within an owner, ``workers`` at a time."""

    def __init__(
        self, *, workers: int = 1, max_slack_s: float = DEFAULT_MAX_SLACK_S,
        clock: Callable[[], float] = time.monotonic, first_audio_s: float = DEFAULT_FIRST_AUDIO_S,
        idle_after_s: float = DEFAULT_IDLE_AFTER_S,
    ) -> None:
        if not max_slack_s > 0:
            raise ValueError(f"max_slack_s: must be positive, got {max_slack_s!r}")
        if not 0 <= first_audio_s <= max_slack_s:
            raise ValueError(f"first_audio_s: must be 0..max_slack_s ({max_slack_s}) seconds, got {first_audio_s!r}")
        self._workers = workers
        self._max_slack_s = max_slack_s
        self._first_audio_s = first_audio_s
        if not idle_after_s >= 0:
            raise ValueError(f"idle_after_s: must be 0 or more seconds, got {idle_after_s!r}")
        self._idle_after_s = idle_after_s
        self._clock = clock
        self._owners: dict[Hashable, _Owner] = {}
        self._turns: collections.deque[Hashable] = collections.deque()  # round-robin order
        self._seq = itertools.count()
        self._wakeup: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self.running = 0
        self.completed = 0
        self.orphaned = 0  # jobs that finished after their owner left (forget_owner)
        self.trims = 0  # times the idle queue handed freed memory back (release_free_memory)
        self._completed_at_trim = 0
        self._trimming = False
        self._in_flight: collections.Counter[Hashable] = collections.Counter()
        self._gone: set[Hashable] = set()
        self._idle_hooks: list[Callable[[], None]] = []

    @property
    def queued(self) -> int:
        return sum(len(o.jobs) for o in self._owners.values())

    @property
    def idle(self) -> bool:
        return self.running == 0 and self.queued == 0

    @property
    def settled(self) -> bool:
        """Idle, and the memory the last jobs freed handed back: a reading of the process's memory
        taken now is not one the idle trim is about to lower."""
        return self.idle and not self._trimming and self.completed == self._completed_at_trim

    async def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="kokoro-engine")
        self._tasks = [asyncio.create_task(self._work(), name=f"engine-worker-{i}") for i in range(self._workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for owner in list(self._owners):
            self.cancel_owner(owner)
        if self._executor is not None:  # the chunk on the model finishes before the engine may go
            await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)

    def submit(
        self, owner: Hashable, fn: Callable[[], Any], *, audio_s: Callable[[Any], float] | None = None,
        then: Callable[[Any], None] | None = None, at_start: Callable[[], None] | None = None,
    ) -> asyncio.Future[Any]:
        """Queue ``fn`` for ``owner``; the future resolves with its result once the model ran it.
        ``audio_s(result)`` says how many seconds of audio the job made for the owner's listener.
        ``then(result)`` runs on the loop as soon as the job succeeded, before the next job is
        picked: an owner queues its follow-up there, so that pick sees it (a callback on the future
        runs only after the pick, which would then always go to another owner). ``at_start()`` runs
        on the loop once the job is picked, just before it goes to the model: a job reads the
        listeners' accounts there (queued_audio_s, others_queued_s), as they are when it runs."""
        if self._wakeup is None:
            raise RuntimeError("scheduler not started")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        state = self._owners.get(owner)
        if state is None:
            state = self._owners[owner] = _Owner()
        if owner not in self._turns:
            self._turns.append(owner)
        state.jobs.append(_Job(owner, fn, future, self._clock(), next(self._seq), audio_s, then, at_start))
        self._wakeup.set()
        return future

    def on_idle(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` in the worker thread each time the queue has stayed dry ``idle_after_s``
        after work (before the memory trim); a job queued meanwhile waits for it, so it must be
        short."""
        self._idle_hooks.append(hook)

    def cancel_owner(self, owner: Hashable) -> int:
        """Drop every queued job of ``owner`` and its audio account; return how many were dropped."""
        state = self._owners.pop(owner, None)
        if state is None:
            return 0
        try:
            self._turns.remove(owner)
        except ValueError:
            pass
        for job in state.jobs:
            job.future.cancel()
        return len(state.jobs)

    def forget_owner(self, owner: Hashable) -> None:
        """The owner has left (session closed, request ended): drop its queue; a job of its that is
        on the model now still finishes, and is counted in ``orphaned``."""
        self.cancel_owner(owner)
        if self._in_flight[owner]:
            self._gone.add(owner)

    def deadline(self, owner: Hashable) -> float | None:
        """When ``owner``'s next queued job is due (clock seconds), or None with nothing queued.
        While the engine is behind, owners take turns whatever their deadlines."""
        state = self._owners.get(owner)
        if state is None or not state.jobs:
            return None
        return self._deadline(state, state.jobs[0])

    def others_queued_s(self, owner: Hashable) -> float | None:
        """The least audio queued for the listener of any other owner with a job queued or on the
        model (0 for one with nothing playing yet: it waits for its first audio); None when no
        other owner has work: how long a job of ``owner`` may hold the model (sizing.py, rule 6)."""
        busy = {o for o, s in self._owners.items() if s.jobs} | {o for o, n in self._in_flight.items() if n}
        others = [self.queued_audio_s(o) for o in busy if o != owner and o not in self._gone]
        return min(others) if others else None

    def queued_audio_s(self, owner: Hashable) -> float:
        """Seconds of ``owner``'s audio made and not yet heard, by the deadline policy's account
        (playback from the first byte, in real time; 0 for an owner with nothing playing). A job of
        ``owner``'s may read it on the worker thread: the account changes only when one of its jobs
        ends, and its jobs run one at a time."""
        state = self._owners.get(owner)
        if state is None or state.runs_out is None:
            return 0.0
        return max(0.0, state.runs_out - self._clock())

    def ran_dry(self, owner: Hashable) -> bool:
        """``owner``'s listener has heard all the audio made for it and waits for more: the
        engine fell behind for it (not a listener waiting for its first audio)."""
        state = self._owners.get(owner)
        return state is not None and state.runs_out is not None and state.runs_out <= self._clock()

    def _behind(self, now: float) -> bool:
        """A listener already playing has run dry and its owner has a job queued: the engine is
        not keeping up, and deadline-first would only spread the silence (module docstring)."""
        return any(s.runs_out is not None and s.runs_out <= now and s.jobs for s in self._owners.values())

    def _deadline(self, state: _Owner, job: _Job) -> float:
        if state.runs_out is None:  # nothing playing: a first window, due within the first-audio grace
            due = job.submitted + self._first_audio_s
        else:
            due = max(state.runs_out, job.submitted)
        return min(due, job.submitted + self._max_slack_s)

    def _drop_cancelled(self) -> None:
        for state in self._owners.values():
            while state.jobs and state.jobs[0].future.cancelled():
                state.jobs.popleft()

    def _next_job(self) -> _Job | None:
        self._drop_cancelled()
        now = self._clock()
        for owner in [o for o, s in self._owners.items() if not s.jobs and (s.runs_out or 0) <= now]:
            del self._owners[owner]  # nothing queued, nothing left playing: forget it
        waiting = [o for o, s in self._owners.items() if s.jobs]
        if not waiting:
            self._turns.clear()
            return None
        # FIFO within an owner: its next job waits while one of its jobs is on the model
        ready = [o for o in waiting if not self._in_flight[o]]
        if not ready:
            return None
        owner = self.pick(ready, now)
        if owner in self._turns:
            self._turns.remove(owner)
        state = self._owners[owner]
        job = state.jobs.popleft()
        if state.jobs and owner not in self._turns:
            self._turns.append(owner)
        return job

    def pick(self, ready: list[Hashable], now: float) -> Hashable:
        """Of the owners with a job ready, the one whose job runs next."""
        if self._behind(now):
            return self.in_turn(ready)
        return min(ready, key=lambda o: (self._deadline(self._owners[o], self._owners[o].jobs[0]),
                                         self._owners[o].jobs[0].seq))

    def in_turn(self, ready: list[Hashable]) -> Hashable:
        """The ready owner that asked longest ago (turns: one job each, in order)."""
        return next((o for o in self._turns if o in ready), ready[0])

    def _account(self, job: _Job, result: Any) -> None:
        state = self._owners.get(job.owner)
        if state is None or job.audio_s is None:
            return
        try:
            seconds = float(job.audio_s(result))
        except Exception:  # a bad measure must not stop the worker
            log.exception("audio_s failed")
            return
        if seconds > 0:  # a job that made no audio starts no playback
            now = self._clock()
            state.runs_out = max(now, state.runs_out or now) + seconds

    async def _stays_dry(self) -> bool:
        """Whether no job is submitted for ``idle_after_s``. Waited in the worker's own task
        (``wait_for`` would start one more for the whole wait, which /diagnostics' ``tasks`` counts)."""
        assert self._wakeup is not None
        try:
            async with asyncio.timeout(self._idle_after_s):
                await self._wakeup.wait()
        except TimeoutError:
            return True
        return False

    async def _work(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            job = self._next_job()
            if job is None:
                self._wakeup.clear()
                if self.running == 0 and self.completed > self._completed_at_trim:
                    if not await self._stays_dry():
                        continue  # work arrived: serve it first
                    if self.running or self.completed == self._completed_at_trim:
                        continue  # another worker took a job, or trimmed, meanwhile
                    self._completed_at_trim = self.completed
                    self.trims += 1
                    self._trimming = True
                    try:
                        await loop.run_in_executor(self._executor, self._when_idle)
                    finally:
                        self._trimming = False
                    continue  # a job may have arrived meanwhile
                await self._wakeup.wait()
                continue
            self.running += 1
            self._in_flight[job.owner] += 1
            try:
                if job.at_start is not None:
                    job.at_start()
                result = await loop.run_in_executor(self._executor, job.fn)
            except asyncio.CancelledError:
                job.future.cancel()
                raise
            except Exception as exc:  # reported to whoever waits; the worker keeps going
                if not job.future.done():
                    job.future.set_exception(exc)
            else:
                if not job.future.done():
                    self._account(job, result)
                    job.future.set_result(result)
                    self._then(job, result)
            finally:
                self.running -= 1
                self.completed += 1
                self._finished(job.owner)

    def _when_idle(self) -> None:
        for hook in self._idle_hooks:
            try:
                hook()
            except Exception:  # a failing hook must not stop the worker
                log.exception("idle hook failed")
        release_free_memory()

    @staticmethod
    def _then(job: _Job, result: Any) -> None:
        if job.then is None:
            return
        try:
            job.then(result)
        except Exception:  # the owner's hook failing must not stop the worker
            log.exception("then failed")

    def _finished(self, owner: Hashable) -> None:
        self._in_flight[owner] -= 1
        if owner in self._gone:
            self.orphaned += 1
        if not self._in_flight[owner]:
            del self._in_flight[owner]
            self._gone.discard(owner)

