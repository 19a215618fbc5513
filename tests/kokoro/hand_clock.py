"""A clock the tests move by hand, so deadlines and stalls do not depend on how fast this machine is.
Imported by name (pytest's ``pythonpath`` puts this folder on the path), like kokoro_harness."""

from __future__ import annotations


class HandClock:
    """Reads ``now`` (starting at 100.0) until a test sets it; it stands still while jobs run."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now
