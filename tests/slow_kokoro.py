"""``python -m slow_kokoro serve ...``: the real Kokoro server, made slow on purpose (tests only).

Run from the Kokoro environment with ``tests`` on PYTHONPATH. ``SLOW_KOKORO_DELAYS`` lists the
seconds the engine sleeps before each chunk's front (``Engine.begin``), in the order the chunks
reach the model after warm-up: ``"5,0,5"`` holds the first chunk's audio back 5 s and leaves a
5 s gap before the third chunk's; later chunks run at full speed. The server is otherwise the
one ``python -m kokoro_server serve`` starts: same routes, scheduler, G2P and model.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kokoro_server import __main__ as server

if TYPE_CHECKING:
    from kokoro_server.config import Settings
    from kokoro_server.scheduler import Scheduler
    from kokoro_server.synth import Synthesizer

DELAYS_ENV = "SLOW_KOKORO_DELAYS"


class SlowEngine:
    """The loaded engine, sleeping before each chunk's front as ``delays`` says."""

    def __init__(self, engine: Any, delays: list[float]) -> None:
        self._engine = engine
        self._delays = delays
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def begin(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            delay = self._delays.pop(0) if self._delays else 0.0
        if delay:
            time.sleep(delay)
        return self._engine.begin(*args, **kwargs)


def slow_load(settings: Settings) -> Callable[[Scheduler], Synthesizer]:
    factory = real_load(settings)
    delays = [float(d) for d in os.environ.get(DELAYS_ENV, "").split(",") if d.strip()]

    def slow(scheduler: Scheduler) -> Synthesizer:
        synth = factory(scheduler)  # warmed up and paced at full speed
        synth.engine = SlowEngine(synth.engine, delays)
        return synth

    return slow


real_load = server.load

if __name__ == "__main__":
    server.load = slow_load
    sys.exit(server.main())
