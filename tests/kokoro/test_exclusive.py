"""Exclusive: one owner at a time, and a close never frees an object under the thread using it."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from kokoro_server.exclusive import Exclusive, ExclusiveClosed, ExclusiveInUse


class Resource:
    def __init__(self) -> None:
        self.closed_by: list[str] = []  # thread names of every close, in order
        self.inside = threading.Event()
        self.release = threading.Event()

    def close(self) -> None:
        self.closed_by.append(threading.current_thread().name)

    def hold(self) -> str:
        """An operation that stays inside until released, like a long mux in libav."""
        self.inside.set()
        assert self.release.wait(10)
        return "done" if not self.closed_by else "freed under me"


def make() -> tuple[Resource, Exclusive[Resource]]:
    resource = Resource()
    return resource, Exclusive(resource, close=Resource.close, name="test")


def run_in_thread(
    guard: Exclusive[Resource], fn: Callable[[Resource], object], results: list[object]
) -> threading.Thread:
    def target() -> None:
        try:
            results.append(guard.use(fn))
        except Exception as exc:  # recorded for the assertion
            results.append(exc)

    thread = threading.Thread(target=target, name="worker")
    thread.start()
    return thread


def test_close_when_idle_frees_at_once_in_the_caller() -> None:
    resource, guard = make()
    guard.close()
    assert resource.closed_by == [threading.current_thread().name]
    assert guard.closed
    guard.close()  # idempotent
    assert len(resource.closed_by) == 1


def test_close_during_an_operation_is_handed_to_it() -> None:
    resource, guard = make()
    results: list[object] = []
    thread = run_in_thread(guard, Resource.hold, results)
    assert resource.inside.wait(10)
    guard.close()  # returns at once, without waiting for the worker
    assert resource.closed_by == [] and guard.closed and guard.busy
    resource.release.set()
    thread.join(10)
    assert results == ["done"]  # the operation finished on a live object
    assert resource.closed_by == ["worker"]  # and the worker freed it afterwards
    with pytest.raises(ExclusiveClosed):
        guard.use(lambda r: None)


def test_a_second_concurrent_user_is_refused() -> None:
    resource, guard = make()
    results: list[object] = []
    thread = run_in_thread(guard, Resource.hold, results)
    assert resource.inside.wait(10)
    with pytest.raises(ExclusiveInUse):
        guard.use(lambda r: None)
    resource.release.set()
    thread.join(10)
    assert results == ["done"] and guard.use(lambda r: "again") == "again"


def test_a_failing_operation_still_releases_and_closes() -> None:
    resource, guard = make()

    def fail(r: Resource) -> None:
        guard.close()  # a close arriving mid-operation
        raise OSError("codec error")

    with pytest.raises(OSError):
        guard.use(fail)
    assert resource.closed_by == [threading.current_thread().name] and not guard.busy


@pytest.mark.parametrize("close_after", [False, True])
def test_last_operation_spends_the_object_without_a_close(close_after: bool) -> None:
    resource, guard = make()
    assert guard.use(lambda r: "flushed", last=True) == "flushed"
    if close_after:
        guard.close()
    assert resource.closed_by == [] and guard.closed
    with pytest.raises(ExclusiveClosed):
        guard.use(lambda r: None)
