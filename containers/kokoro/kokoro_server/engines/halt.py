"""Stopping a model job its owner no longer wants, as soon as the engine can.

A cancelled utterance's job may already be on the model: cancelling the future that waits for it
does not stop the worker thread that runs it, and the next answer would wait behind it (a window of
a long sentence takes a second or more on a CPU). Each job gets a :class:`Halt`; the synthesizer
sets it when the job's future is cancelled (a barge-in, a client that left), and the engine stops
where it can: onnxruntime ends a running ``session.run`` between two nodes (``RunOptions.terminate``),
torch checks before each module of the model runs. Either way the job raises :class:`Halted` and
its result was never wanted; a job halted before it started does not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .errors import EngineError


class Halted(EngineError):
    """The job was stopped because its owner cancelled it; nobody waits for its result."""


class Halt:
    """One job's stop signal: set on the event loop, read on the worker thread running the job."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._hooks: list[Callable[[], None]] = []

    @property
    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Stop the job: mark it, and tell the engine call running now (its ``watching`` hook)."""
        with self._lock:
            if self._set:
                return
            self._set = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def when_cancelled(self, future: asyncio.Future[Any]) -> None:
        """A done callback for the job's future: a cancelled future halts the job."""
        if future.cancelled():
            self.set()

    def check(self) -> None:
        """Raise :class:`Halted` once set: the engine calls it between the steps it can stop at."""
        if self._set:
            raise Halted("the job was cancelled")

    @contextlib.contextmanager
    def watching(self, on_halt: Callable[[], None]) -> Iterator[None]:
        """Run ``on_halt`` (from the thread that halts) if the job is halted while the block runs;
        raise :class:`Halted` at once if it already was."""
        with self._lock:
            if self._set:
                raise Halted("the job was cancelled")
            self._hooks.append(on_halt)
        try:
            yield
        finally:
            with self._lock:
                self._hooks.remove(on_halt)
