"""Comparison-only variants of the server, injected by the bench harness (never server settings).

The production server holds what it serves with. What a benchmark compares it against lives here:

* ``round_robin``: owners always take turns, one job each (the scheduler before deadline-first);
* ``one_shot``: every chunk decoded in one shot (first audio after the whole chunk);
* ``windowed_per_chunk``: every chunk's windows start small, as if nothing came before it;
* ``sentence_jobs``: one model job per sentence, and a later window held to ``continued`` frames
  whenever another owner has work, 240 alone (the engine before sentences joined: issue 33);
* ``no_halt``: a cancelled job already on the model runs to its end (the engine before halting:
  issue 43; bench/barge_in.py).

In one process, build them from :func:`scheduler_class` and :func:`synthesizer_class`. For a server process,
``python -m bench.variant_server serve ...`` with ``KOKORO_BENCH_VARIANTS=round_robin,one_shot``
(bench/server.py's ``ServerProcess(variants=...)`` does both) serves with them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kokoro_server.engines.halt import Halt
from kokoro_server.scheduler import Scheduler
from kokoro_server.synth import Synthesizer

VARIANTS = ("round_robin", "one_shot", "windowed_per_chunk", "sentence_jobs", "no_halt")
DECODING = ("one_shot", "windowed_per_chunk", "sentence_jobs", "no_halt")  # one synthesizer: at most one of them
SENTENCE_JOBS_ALONE = 240  # WindowPlan.continued_alone before sentences joined
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


class SentenceJobsSynthesizer(Synthesizer):
    """One model job per sentence; a later window holds ``continued`` frames whenever another
    owner has work, SENTENCE_JOBS_ALONE alone, however far ahead every listener is."""

    def joinable_frames(self, owner: Hashable) -> int:
        return 0

    def window_cap(self, owner: Hashable) -> int:
        assert self.plan is not None
        alone = self.scheduler.others_queued_s(owner) is None
        return SENTENCE_JOBS_ALONE if alone else self.plan.continued


class NoHaltSynthesizer(Synthesizer):
    """A cancelled job's future no longer halts it: a window on the model is decoded to its end."""

    def _queue(self, owner: Hashable, run: Any, halt: Halt, then: Any) -> Any:
        return super()._queue(owner, run, Halt(), then)  # the job watches its own halt, never set


def parse(text: str) -> frozenset[str]:
    """``round_robin,one_shot`` as a set of variant names; ValueError naming an unknown one."""
    names = frozenset(filter(None, (name.strip() for name in text.split(","))))
    unknown = sorted(names - set(VARIANTS))
    if unknown:
        raise ValueError(f"{ENV}: unknown variant {unknown[0]!r}, expected some of {', '.join(VARIANTS)}")
    decoding = sorted(names & set(DECODING))
    if len(decoding) > 1:
        raise ValueError(f"{ENV}: {' and '.join(decoding)} exclude each other")
    return names


def scheduler_class(variants: Iterable[str]) -> type[Scheduler]:
    """The scheduler a server with ``variants`` uses."""
    return RoundRobinScheduler if "round_robin" in variants else Scheduler


def synthesizer_class(variants: Iterable[str]) -> type[Synthesizer]:
    """The synthesizer a server with ``variants`` uses."""
    names = set(variants)
    if "one_shot" in names:
        return OneShotSynthesizer
    if "sentence_jobs" in names:
        return SentenceJobsSynthesizer
    if "no_halt" in names:
        return NoHaltSynthesizer
    return PerChunkSynthesizer if "windowed_per_chunk" in names else Synthesizer
