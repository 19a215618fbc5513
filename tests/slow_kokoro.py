"""``python -m slow_kokoro serve ...``: the real Kokoro server, made slow on purpose (tests only).

Run from the Kokoro environment with ``tests`` on PYTHONPATH. ``SLOW_KOKORO_DELAYS`` lists the
seconds the engine sleeps before each chunk's front (``Engine.begin``), in the order the chunks
reach the model after warm-up: ``"5,0,5"`` holds the first chunk's audio back 5 s and leaves a
5 s gap before the third chunk's; later chunks run at full speed. The server is otherwise the
one ``python -m kokoro_server serve`` starts: same routes, scheduler, G2P and model, constructed
with a synthesizer that wraps the engine (``__main__.Strategies``, as benchmarks pass theirs).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from kokoro_server import __main__ as server
from kokoro_server.sizing import Cost
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


class SlowSynthesizer(Synthesizer):
    """The server's synthesizer, its engine slowed once warm-up and the pace measurement are done
    (``keep_up`` is the factory's last step before serving): it serves at full speed until then."""

    def keep_up(self, cost: Cost, *, remeasure: bool = False, decoded: Sequence[tuple[int, float]] = ()) -> None:
        super().keep_up(cost, remeasure=remeasure, decoded=decoded)
        delays = [float(d) for d in os.environ.get(DELAYS_ENV, "").split(",") if d.strip()]
        self.engine = SlowEngine(self.engine, delays)


if __name__ == "__main__":
    sys.exit(server.main(None, server.Strategies(synthesizer=SlowSynthesizer)))
