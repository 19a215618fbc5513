"""Voice metrics as log lines: one JSON object per line on stdout, nothing else on that line.

SageMaker sends the container's stdout and stderr to CloudWatch Logs (log group
``/aws/sagemaker/Endpoints/<endpoint>``); the endpoint stack turns these lines into CloudWatch
metrics with metric filters that select JSON fields (``{ $.kokoro_metric = "utterance" }``), so a
line must be a whole JSON object, without the timestamp prefix of the ordinary log format.
docs/operations.md says why metric filters rather than EMF, and which metric each field feeds.

Three kinds, told apart by ``kokoro_metric``:

- ``utterance``: one per utterance spoken to the end (both routes): ``route`` (ws | http),
  ``format``, ``first_audio_ms`` (from the moment the utterance could be spoken, i.e. it was
  received and everything before it on its session was sent, to its first audio handed to the
  socket), ``synthesis_ms`` (time on the model), ``audio_ms``, ``stall_ms`` (how long a listener
  playing in real time from the first audio would have waited for later audio).
- ``load``: once when the model is ready, then every ``interval_s``: ``sessions`` (open
  WebSockets), ``queued`` (model jobs waiting), ``running`` (model jobs on the engine).
- ``restart``: the supervisor saw the serving process die and starts it again: ``reason``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any, Final, TextIO

KIND: Final = "kokoro_metric"
UTTERANCE: Final = "utterance"
LOAD: Final = "load"
RESTART: Final = "restart"
LOAD_INTERVAL_S: Final = 60.0


def emit(kind: str, *, stream: TextIO | None = None, **fields: Any) -> None:
    """Write one metric line; a failure to write must never break serving."""
    line = json.dumps({KIND: kind, **fields}, separators=(",", ":"), sort_keys=True)
    try:
        out = stream or sys.stdout
        out.write(line + "\n")
        out.flush()
    except (OSError, ValueError):  # stdout closed or gone: metrics are best effort
        pass


class UtteranceClock:
    """Times one utterance: first audio and stalls against a real-time listener."""

    def __init__(self, *, route: str, fmt: str) -> None:
        self._route = route
        self._format = fmt
        self._started = time.perf_counter()
        self._first: float | None = None
        self._audio_s = 0.0
        self._synthesis_s = 0.0
        self._stall_s = 0.0

    def audio(self, *, seconds: float, synthesis_s: float) -> None:
        """Call when a chunk of ``seconds`` of audio has been handed to the socket."""
        now = time.perf_counter()
        if self._first is None:
            self._first = now
        else:  # a real-time listener has played everything sent so far by this time
            self._stall_s += max(0.0, now - (self._first + self._audio_s + self._stall_s))
        self._audio_s += seconds
        self._synthesis_s += synthesis_s

    def finish(self) -> None:
        """Emit the utterance's line (nothing when it produced no audio)."""
        if self._first is None:
            return
        emit(
            UTTERANCE, route=self._route, format=self._format,
            first_audio_ms=round((self._first - self._started) * 1000),
            synthesis_ms=round(self._synthesis_s * 1000), audio_ms=round(self._audio_s * 1000),
            stall_ms=round(self._stall_s * 1000),
        )


async def report_load(read: Callable[[], dict[str, int]], *, interval_s: float = LOAD_INTERVAL_S) -> None:
    """Emit a ``load`` line now and every ``interval_s`` until cancelled."""
    while True:
        fields: dict[str, Any] = dict(read())
        emit(LOAD, **fields)
        await asyncio.sleep(interval_s)
