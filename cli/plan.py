"""`deploy-tts plan`: instances, scaling target and hourly cost for N concurrent sessions.

Two inputs, both committed files that name where they come from: the price table
(cli/sagemaker_prices.json: source and date inside) and a measured sessions-per-instance figure
from bench/results (a ``capacity`` block: ``instance_type``, ``sessions``, ``budget_ms``, written
by ``python -m bench.capacity --instance-type T`` run on that instance type). infra/capacity.py reads it
and sets the scaling target, here and in the stack alike. Where no measurement exists, the default
instance type is planned from the stack's own estimate, labelled ESTIMATE in every line that uses
it; other types ask for ``--sessions-per-instance`` rather than inventing a figure. The plan is
checked against maxInstances and, given a quota, against what an update needs
(infra/update_policy.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from cli.aws import CliError
from infra.capacity import HEADROOM, Capacity, estimated_capacity, measured_capacity, target_for
from infra.update_policy import update_peak_instances

__all__ = ["Capacity", "Plan", "load_prices", "make_plan", "measured_capacity", "render", "resolve_capacity"]

PRICES: Final = Path(__file__).resolve().parent / "sagemaker_prices.json"
HOURS_PER_MONTH: Final = 730


@dataclass(frozen=True, kw_only=True)
class Plan:
    sessions: int
    instance_type: str
    sessions_per_instance: int
    capacity_source: str
    instances: int
    scaling_target: int
    usd_per_hour: float | None
    usd_per_month: float | None
    price_source: str
    capacity_measured: bool = True
    max_instances: int | None = None
    update_peak_instances: int = 0
    quota: int | None = None
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load_prices(path: Path = PRICES) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def make_plan(*, sessions: int, instance_type: str, capacity: Capacity, prices: dict[str, Any],
              max_instances: int | None = None, quota: int | None = None) -> Plan:
    if sessions < 1:
        raise CliError("--sessions: expected at least 1")
    if capacity.sessions < 1:
        raise CliError("--sessions-per-instance: expected at least 1")
    target = target_for(capacity.sessions)  # the rule the stack's scaling policy follows
    instances = math.ceil(sessions / target)  # enough that each runs at or under the scaling target
    peak = update_peak_instances(instances)
    problems = []
    if max_instances is not None and instances > max_instances:
        problems.append(f"needs {instances} instances but maxInstances is {max_instances}: autoscaling stops at "
                        f"{max_instances} (about {max_instances * target} sessions); deploy with "
                        f"--max-instances {instances}")
    if quota is not None and quota < peak:
        problems.append(f"the '{instance_type} for endpoint usage' quota is {quota}; {instances} instances need "
                        f"{peak} during an update (one rolling batch beside the fleet): request {peak}")
    rate = prices["usd_per_hour"].get(instance_type)
    hourly = None if rate is None else round(instances * float(rate), 3)
    return Plan(
        sessions=sessions, instance_type=instance_type, sessions_per_instance=capacity.sessions,
        capacity_source=capacity.source, instances=instances, scaling_target=target,
        usd_per_hour=hourly, usd_per_month=None if hourly is None else round(hourly * HOURS_PER_MONTH, 2),
        price_source=f"{prices['source']}, retrieved {prices['retrieved']}" if rate is not None
        else f"no price for {instance_type} in cli/sagemaker_prices.json",
        capacity_measured=capacity.measured, max_instances=max_instances, update_peak_instances=peak,
        quota=quota, problems=tuple(problems),
    )


def resolve_capacity(instance_type: str, override: int | None) -> Capacity:
    if override is not None:
        return Capacity(sessions=override, source="--sessions-per-instance")
    measured = measured_capacity(instance_type) or estimated_capacity(instance_type)
    if measured is None:
        raise CliError(
            f"no measured sessions-per-instance figure for {instance_type} in bench/results "
            "(no 'capacity' block for that instance type): run the benchmark on one "
            "(bench/gpu.sh on a GPU instance), or pass --sessions-per-instance N from your own measurement"
        )
    return measured


def render(plan: Plan) -> str:
    cost = ("no price known" if plan.usd_per_hour is None
            else f"${plan.usd_per_hour:.2f}/hour, about ${plan.usd_per_month:,.0f}/month")
    kind = "measured" if plan.capacity_measured else "ESTIMATE"
    quota = (f"{plan.update_peak_instances} needed during an update"
             + (f", quota {plan.quota}" if plan.quota is not None else " (pass --region to read yours)"))
    return "\n".join([
        f"{plan.sessions} concurrent sessions on {plan.instance_type}:",
        f"  capacity       {plan.sessions_per_instance} sessions per instance, {kind} ({plan.capacity_source})",
        f"  scaling target {plan.scaling_target} concurrent sessions per instance ({HEADROOM:.0%} of capacity)",
        f"  instances      {plan.instances}" + (f" (maxInstances {plan.max_instances})" if plan.max_instances else ""),
        f"  quota          {quota}",
        f"  cost           {cost} on demand",
        f"  prices from    {plan.price_source}",
        *(f"  PROBLEM        {problem}" for problem in plan.problems),
    ])
