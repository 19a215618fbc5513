"""Give the memory freed after a burst of synthesis back to the operating system.

glibc's malloc keeps freed blocks in its arenas (one per thread that allocated) for reuse, so a
server that just voiced many sessions at once stays at its peak resident size while idle, and
the peak creeps as tensors of new shapes fragment the arenas. ``malloc_trim(0)`` releases the
free pages of every arena. The scheduler calls it once the model has stayed idle a while after
work (30 s by default, scheduler.py: not between two answers of a conversation, whose next one
would fault those pages in again), so an idle container's resident size is what it uses, not its
history; a leak still shows. Elsewhere than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """True when some memory was returned to the system."""
    return bool(_TRIM(0)) if _TRIM is not None else False
