"""Sessions one instance sustains, as measured, and the scaling target derived from it.

One place for the rule both the stack's autoscaling policy and ``deploy-tts plan`` follow: read a
``capacity`` block (``instance_type``, ``sessions``, ``budget_ms``) that ``python -m
bench.capacity --instance-type T`` wrote on that instance type, and set the target at
:data:`HEADROOM` of it. A figure measured on another machine is never used for an instance type it
was not measured on. No aws_cdk import: the CLIs use this without loading the CDK.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
RESULTS: Final = (REPO / "bench/results/capacity.json", REPO / "bench/results/gpu/capacity.json",
                  REPO / "bench/results/latest.json", REPO / "bench/results/gpu/latest.json")
"""Where measurements are looked for, in order: the first one for the instance type wins."""

HEADROOM: Final = 0.75
"""The scaling target is 75 % of the measured capacity: a scale-out takes minutes (cooldown plus an
instance start), and sessions keep arriving meanwhile."""

MEASURED: Final = "measured"
"""cdk.json's ``targetConcurrentRequestsPerInstance``: derive the target from a measurement."""

UNMEASURED_TARGET: Final = 8
"""Used, with a synth warning, only while no measurement exists for the instance type: the figure
the stack carried before capacity was measured. An estimate, not a measurement."""


ESTIMATED_FOR: Final = ("ml.g5.xlarge",)
"""Instance types `deploy-tts plan` may plan from the estimate below (the default type only)."""


@dataclass(frozen=True, kw_only=True)
class Capacity:
    sessions: int
    source: str  # the file (and run) the figure comes from, or "--sessions-per-instance"
    measured: bool = True


def estimated_capacity(instance_type: str) -> Capacity | None:
    """The estimate behind :data:`UNMEASURED_TARGET`, as a capacity: the smallest whose target is
    that figure. Offered for :data:`ESTIMATED_FOR` only, and always labelled an estimate."""
    if instance_type not in ESTIMATED_FOR:
        return None
    sessions = math.ceil(UNMEASURED_TARGET / HEADROOM)
    return Capacity(sessions=sessions, measured=False,
                    source=(f"ESTIMATE, not measured: the figure behind the stack's unmeasured scaling target "
                            f"{UNMEASURED_TARGET} (infra/capacity.py); measure with `python -m bench.capacity "
                            f"--instance-type {instance_type}` on one"))


@dataclass(frozen=True, kw_only=True)
class ScalingTarget:
    value: int
    source: str
    measured: bool


def measured_capacity(instance_type: str, results: tuple[Path, ...] = RESULTS) -> Capacity | None:
    """The sessions one instance of ``instance_type`` sustained in a benchmark, if one measured it."""
    for path in results:
        if not path.is_file():
            continue
        report = json.loads(path.read_text())
        block = report.get("capacity")
        if (isinstance(block, dict) and block.get("instance_type") == instance_type
                and int(block.get("sessions", 0)) > 0):
            shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            return Capacity(sessions=int(block["sessions"]), source=f"{shown} ({report.get('timestamp', 'undated')})")
    return None


def target_for(capacity: int) -> int:
    """The scaling target for an instance that sustains ``capacity`` sessions (at least 1)."""
    return max(1, math.floor(capacity * HEADROOM))


def scaling_target(instance_type: str, results: tuple[Path, ...] = RESULTS) -> ScalingTarget:
    """The stack's target when cdk.json says ``measured``: from the measurement, else the estimate."""
    found = measured_capacity(instance_type, results)
    if found is None:
        return ScalingTarget(
            value=UNMEASURED_TARGET, measured=False,
            source=(f"no measured capacity for {instance_type} in bench/results: the scaling target is the "
                    f"unmeasured estimate {UNMEASURED_TARGET}; run `python -m bench.capacity --instance-type "
                    f"{instance_type}` on one (bench/gpu.sh does) and commit its capacity.json, or set "
                    "targetConcurrentRequestsPerInstance to your own figure"),
        )
    return ScalingTarget(value=target_for(found.sessions), measured=True,
                         source=f"{HEADROOM:.0%} of {found.sessions} sessions measured in {found.source}")
