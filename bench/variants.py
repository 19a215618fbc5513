"""Comparison-only variants of the server, passed in by the bench harness (never server settings).

The production server holds what it serves with. What a benchmark compares it against lives here,
as small classes the server is constructed with (``kokoro_server.__main__.Strategies``):

* ``round_robin``: owners always take turns, one job each (the scheduler before deadline-first);
* ``one_shot``: every chunk decoded in one job (first audio after the whole chunk);
* ``windowed_per_chunk``: every chunk's first window sized as if its listener had nothing queued;
* ``sentence_jobs``: one model job per sentence, and a later window held to 160 frames whenever
  another owner has work, 240 alone (the engine before sentences joined: issue 33);
* ``no_halt``: a cancelled job already on the model runs to its end (the engine before halting:
  issue 43; bench/barge_in.py);
* ``wide_seams``: every window decoded whole, body and vocoder, over FEATURE_CONTEXT frames before it
  and its crossfade and FEATURE_CONTEXT after (48 frames rendered twice a seam), priced so by the
  sizer with rule 6's floor at the 0.2 it had: the seam before the vocoder was cut from the body
  (engines/windows.py), which rendered 40 (20 before, 20 after with the crossfade inside).

:func:`strategies` builds them from names. For a server process, ``python -m bench.variant_server
serve ...`` with ``KOKORO_BENCH_VARIANTS=round_robin,one_shot`` (bench/server.py's
``ServerProcess(variants=...)`` does both) serves with them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kokoro_server.__main__ import Strategies
from kokoro_server.engines import Decoding, Engine, Synthesis
from kokoro_server.engines.halt import Halt
from kokoro_server.engines.windows import FEATURE_CONTEXT, Seams
from kokoro_server.scheduler import Scheduler
from kokoro_server.sizing import JobSizer, Profile, Situation, Sizer
from kokoro_server.synth import Synthesizer

VARIANTS = ("round_robin", "one_shot", "windowed_per_chunk", "sentence_jobs", "no_halt", "wide_seams")
SIZING = ("one_shot", "windowed_per_chunk", "sentence_jobs", "wide_seams")  # one sizer: at most one of them
SYNTHESIZING = ("no_halt", "wide_seams")  # one synthesizer: at most one of them
SENTENCE_JOBS_SHARED, SENTENCE_JOBS_ALONE = 160, 240  # window caps before sentences joined
ENV = "KOKORO_BENCH_VARIANTS"


class RoundRobinScheduler(Scheduler):
    """Owners take turns, one job each, always: deadlines are ignored."""

    def pick(self, ready: list[Hashable], now: float) -> Hashable:
        return self.in_turn(ready)


@dataclass(frozen=True)
class OneShotSizer:
    """Every chunk is one window, and one job per chunk: its first audio comes after all of it."""

    def next_window(self, situation: Situation) -> int:
        return situation.left

    def job_frames(self, situation: Situation) -> int:
        return 0


@dataclass(frozen=True)
class PerChunkSizer:
    """The server's sizer, but a chunk's first window is sized as if nothing were queued."""

    sizer: Sizer = field(default_factory=Sizer)

    def next_window(self, situation: Situation) -> int:
        return self.sizer.next_window(situation if situation.started else replace(situation, queued_s=0.0))

    def job_frames(self, situation: Situation) -> int:
        return 0


@dataclass(frozen=True)
class SentenceJobsSizer:
    """One job per sentence; a window holds at most SENTENCE_JOBS_SHARED frames while another owner
    has work, SENTENCE_JOBS_ALONE alone, however far ahead every listener is."""

    sizer: Sizer = field(default_factory=Sizer)

    def next_window(self, situation: Situation) -> int:
        cap = SENTENCE_JOBS_ALONE if situation.others_s is None else SENTENCE_JOBS_SHARED
        return min(self.sizer.next_window(situation), cap)

    def job_frames(self, situation: Situation) -> int:
        return 0


class NoHaltSynthesizer(Synthesizer):
    """A cancelled job's future no longer halts it: a window on the model is decoded to its end."""

    def _queue(self, owner: Hashable, run: Any, halt: Halt, then: Any, queues: Any) -> Any:
        return super()._queue(owner, run, Halt(), then, queues)  # the job watches its own halt, never set


WIDE = Seams(context=FEATURE_CONTEXT, opening=FEATURE_CONTEXT)
"""The seams of :class:`WideSeams`: the body's whole context rendered on both sides of every window."""


class WideSeams:
    """An engine whose windows render the whole decoder over FEATURE_CONTEXT frames around them."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.name, self.device = engine.name, engine.device

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
        inner = self.engine.begin(phonemes, style, speed, halt=halt)

        def decode(lo: int, hi: int, halt: Halt | None = None, *, reach: int = 0) -> np.ndarray:
            return inner.decode(lo, hi, halt, reach=reach)  # the body over the span the vocoder renders

        return Decoding(frames=inner.frames, decode=decode, durations=inner.durations, seams=WIDE)

    def synthesize(self, phonemes: str, style: np.ndarray, speed: float) -> Synthesis:
        return self.engine.synthesize(phonemes, style, speed)


class WideSeamsSynthesizer(Synthesizer):
    """The server's synthesizer over :class:`WideSeams` of its engine."""

    def __init__(self, *, engine: Engine, **rest: Any) -> None:
        super().__init__(engine=WideSeams(engine), **rest)


WIDE_SEAMS_PROFILE = Profile(seams=WIDE, contention_waste=0.2)
SIZERS: dict[str, Callable[[], JobSizer]] = {
    "one_shot": OneShotSizer, "windowed_per_chunk": PerChunkSizer, "sentence_jobs": SentenceJobsSizer,
    "wide_seams": lambda: Sizer(WIDE_SEAMS_PROFILE)}
SYNTHESIZERS: dict[str, type[Synthesizer]] = {"no_halt": NoHaltSynthesizer, "wide_seams": WideSeamsSynthesizer}


def parse(text: str) -> frozenset[str]:
    """``round_robin,one_shot`` as a set of variant names; ValueError naming an unknown one."""
    names = frozenset(filter(None, (name.strip() for name in text.split(","))))
    unknown = sorted(names - set(VARIANTS))
    if unknown:
        raise ValueError(f"{ENV}: unknown variant {unknown[0]!r}, expected some of {', '.join(VARIANTS)}")
    for group in (SIZING, SYNTHESIZING):
        chosen = sorted(names & set(group))
        if len(chosen) > 1:
            raise ValueError(f"{ENV}: {' and '.join(chosen)} exclude each other")
    return names


def strategies(variants: Iterable[str]) -> Strategies:
    """What a server with ``variants`` is constructed with."""
    names = set(variants)
    sizing = sorted(names & set(SIZING))
    return Strategies(
        scheduler=RoundRobinScheduler if "round_robin" in names else None,
        synthesizer=next((SYNTHESIZERS[name] for name in SYNTHESIZING if name in names), None),
        sizer=SIZERS[sizing[0]]() if sizing else None,
    )
