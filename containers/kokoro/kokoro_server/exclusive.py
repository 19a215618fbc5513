"""One owner at a time for objects that worker threads use and that must not be freed under them.

A codec context (PyAV/FFmpeg) runs ``encode``/``mux`` in a worker thread so the event loop keeps
serving. Cancelling the coroutine that awaits the thread does not stop the thread, so the code
that cleans up after a vanished client may run while the thread is still inside libav; freeing
the container then crashes the whole process (segfault in libavformat). :class:`Exclusive` makes
that impossible: every operation holds the object alone, a second concurrent operation is a bug
and raises, and ``close()`` never waits on the event loop: when an operation is in flight, the
close is handed to it and runs in that thread the moment it finishes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Exclusive", "ExclusiveClosed", "ExclusiveInUse"]

T = TypeVar("T")
R = TypeVar("R")


class ExclusiveClosed(RuntimeError):
    """The object was closed (or finished): it takes no more operations."""


class ExclusiveInUse(RuntimeError):
    """Another thread is using the object right now: two owners at once is a bug."""


class Exclusive(Generic[T]):
    """Run operations on ``resource`` one at a time; ``close`` it once nobody is inside it."""

    def __init__(self, resource: T, *, close: Callable[[T], None], name: str) -> None:
        self._resource: T | None = resource
        self._close = close
        self._name = name
        self._state = threading.Lock()  # guards the flags below; never held during an operation
        self._busy = False
        self._close_pending = False

    @property
    def closed(self) -> bool:
        """True once closed, or once a close is waiting for the operation in flight."""
        with self._state:
            return self._resource is None or self._close_pending

    @property
    def busy(self) -> bool:
        with self._state:
            return self._busy

    def use(self, operation: Callable[[T], R], *, last: bool = False) -> R:
        """Run ``operation(resource)`` as its only user. With ``last`` the object is spent after
        it (``operation`` releases it itself, as a codec's final flush does): no close follows."""
        with self._state:
            if self._resource is None or self._close_pending:
                raise ExclusiveClosed(f"{self._name}: already finished or closed")
            if self._busy:
                raise ExclusiveInUse(f"{self._name}: in use by another thread")
            self._busy = True
            resource = self._resource
            if last:
                self._resource = None
        try:
            return operation(resource)
        finally:
            with self._state:
                self._busy = False
                handed_over = self._close_pending and self._resource is not None
                if handed_over:
                    self._resource, self._close_pending = None, False
            if handed_over:
                self._close(resource)  # close() was called while we were inside: ours to do

    def close(self) -> None:
        """Free the resource now, or, if an operation is in flight, as soon as it returns (in
        its thread). Idempotent; never blocks on the operation."""
        with self._state:
            if self._resource is None:
                return
            if self._busy:
                self._close_pending = True
                return
            resource, self._resource = self._resource, None
        self._close(resource)
