"""Bounded polls: the one way tests wait for a condition (never a fixed sleep before an assertion).

Both test environments import it by name (pyproject.toml's ``pythonpath`` holds ``tests``).
Each call returns the last value it saw, so the caller's assertion shows what was there when
time ran out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(probe: Callable[[], T], *, until: Callable[[T], object] = bool, timeout: float = 15.0,
               interval: float = 0.1) -> T:
    """Call ``probe`` until ``until(value)`` holds or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    value = probe()
    while not until(value) and time.monotonic() < deadline:
        time.sleep(interval)
        value = probe()
    return value


async def wait_until_async(probe: Callable[[], Awaitable[T]], *, until: Callable[[T], object] = bool,
                           timeout: float = 15.0, interval: float = 0.1) -> T:
    """:func:`wait_until` for a coroutine probe, sleeping without blocking the event loop."""
    deadline = time.monotonic() + timeout
    value = await probe()
    while not until(value) and time.monotonic() < deadline:
        await asyncio.sleep(interval)
        value = await probe()
    return value
