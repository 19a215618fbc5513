"""How the endpoint is updated, and what that costs in instances: plain data, no aws_cdk import.

One rule that the stack (its ``DeploymentConfig``) and the CLI's quota preflight both follow, so
the number of instances an update may start is computed in one place.

Choice (docs/infrastructure.md, "Updates that keep sessions"): a **rolling** update in batches of
:data:`BATCH_PERCENT` of the variant's instances, not blue/green. Blue/green starts a whole second
fleet while the first still runs, so with a quota equal to ``maxInstances`` every update fails;
a rolling update needs only one batch more than the fleet. Sessions on an instance a batch
replaces are not cut: SageMaker stops it with SIGTERM and kills it 30 s later, and the container
drains in that window (KOKORO_DRAIN_S, at most 25 s: the utterance in flight finishes, then the
socket closes with 1001 and the client resumes on another instance).
"""

from __future__ import annotations

import math
from typing import Final

BATCH_PERCENT: Final = 50
"""CAPACITY_PERCENT, so the batch stays inside the documented range ("between 5% to 50% of the
variant's total instance count", RollingUpdatePolicy API reference) at any count autoscaling
reaches; an INSTANCE_COUNT of 1 would be 100 % of a one-instance variant and 3 % of thirty."""

BAKE_SECONDS: Final = 300
"""WaitIntervalInSeconds: each batch serves for 5 minutes while SageMaker watches the rollback
alarms; the 5XX alarm sums 5 minutes, the first-audio alarm needs 3 of 5 one-minute periods."""

MAX_TIMEOUT_SECONDS: Final = 28_800
MIN_TIMEOUT_SECONDS: Final = 600
"""MaximumExecutionTimeoutInSeconds' documented range."""


def batch_instances(instances: int) -> int:
    """Instances one rolling batch starts for a variant of ``instances`` (at least one).

    Our assumption: SageMaker rounds a percentage up to whole instances (a one-instance variant
    is replaced one instance at a time). AWS does not document the rounding.
    """
    return max(1, math.ceil(instances * BATCH_PERCENT / 100))


def update_peak_instances(max_instances: int) -> int:
    """The most instances of the type the endpoint holds during an update: a fleet scaled out to
    ``max_instances`` plus one batch. This is what the account's quota must allow."""
    return max_instances + batch_instances(max_instances)


def execution_timeout_seconds(*, max_instances: int, startup_s: int, download_s: int) -> int:
    """A limit for the whole update: every batch may take its download, its start-up health check
    and its bake period (the rollback, batch by batch, fits in the same figure again)."""
    batches = math.ceil(max_instances / batch_instances(max_instances))
    needed = batches * (download_s + startup_s + BAKE_SECONDS)
    return max(MIN_TIMEOUT_SECONDS, min(MAX_TIMEOUT_SECONDS, needed))
