"""Comparison-only variants of the server, injected by the bench harness (never server settings).

The production server holds what it serves with. What a benchmark compares it against lives here:

* ``round_robin``: owners always take turns, one job each (the scheduler before deadline-first);
* ``one_shot``: every chunk decoded in one shot (first audio after the whole chunk);
* ``windowed_per_chunk``: every chunk's windows start small, as if nothing came before it.

In one process, build them from :func:`scheduler_class` and :func:`synthesizer_class`. For a server process,
``python -m bench.variant_server serve ...`` with ``KOKORO_BENCH_VARIANTS=round_robin,one_shot``
(bench/server.py's ``ServerProcess(variants=...)`` does both) serves with them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kokoro_server.scheduler import Scheduler
from kokoro_server.synth import Synthesizer

VARIANTS = ("round_robin", "one_shot", "windowed_per_chunk")
ENV = "KOKORO_BENCH_VARIANTS"


class RoundRobinScheduler(Scheduler):
    """Owners take turns, one job each, always: deadlines are ignored."""

    def _pick(self, ready: list[Hashable], now: float) -> Hashable:
        return self._in_turn(ready)


class OneShotSynthesizer(Synthesizer):
    """Every chunk decoded in one shot: its first audio comes after all of it."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{**options, "windowed": False})


class PerChunkSynthesizer(Synthesizer):
    """Every chunk's windows start small, whatever audio its speech made before it."""

    def follows(self, frames_before: int) -> bool:
        return False


def parse(text: str) -> frozenset[str]:
    """``round_robin,one_shot`` as a set of variant names; ValueError naming an unknown one."""
    names = frozenset(filter(None, (name.strip() for name in text.split(","))))
    unknown = sorted(names - set(VARIANTS))
    if unknown:
        raise ValueError(f"{ENV}: unknown variant {unknown[0]!r}, expected some of {', '.join(VARIANTS)}")
    if {"one_shot", "windowed_per_chunk"} <= names:
        raise ValueError(f"{ENV}: one_shot and windowed_per_chunk exclude each other")
    return names


def scheduler_class(variants: Iterable[str]) -> type[Scheduler]:
    """The scheduler a server with ``variants`` uses."""
    return RoundRobinScheduler if "round_robin" in variants else Scheduler


def synthesizer_class(variants: Iterable[str]) -> type[Synthesizer]:
    """The synthesizer a server with ``variants`` uses."""
    names = set(variants)
    if "one_shot" in names:
        return OneShotSynthesizer
    return PerChunkSynthesizer if "windowed_per_chunk" in names else Synthesizer
