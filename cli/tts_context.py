"""The CDK context `deploy-tts` deploys and diffs with: built from its flags, or read back from
the deployed Endpoint stack (its DeployContext output), and the quota check that depends on it."""

from __future__ import annotations

import json

from cli.aws import AwsTarget, CliError, get_stack, stack_outputs
from cli.aws_checks import check_endpoint_quota
from cli.cdk import ToolCheck
from cli.options import DEFAULT_MAX_INSTANCES, DEFAULT_MIN_INSTANCES, Engine
from cli.stacks import ENDPOINT_STACK


def tts_context(
    *,
    instance_type: str,
    engine: Engine,
    endpoint_name: str,
    min_instances: int | None,
    max_instances: int | None,
    model_revision: str,
    alarm_email: str | None = None,
) -> dict[str, str | int | None]:
    """CDK context for the TTS stacks (validated here, so CDK never sees nonsense)."""
    if not instance_type.startswith("ml."):
        raise CliError(f"--instance-type {instance_type!r} is not a SageMaker type.", hint="Use e.g. ml.g5.xlarge.")
    if min_instances is not None and max_instances is not None and min_instances > max_instances:
        raise CliError(f"--min-instances {min_instances} is larger than --max-instances {max_instances}.")
    return {
        "instanceType": instance_type,
        "engine": engine.value,
        "endpointName": endpoint_name,
        "minInstances": min_instances,
        "maxInstances": max_instances,
        "modelRevision": model_revision,
        "alarmEmail": alarm_email,
    }


def quota_check(target: AwsTarget, context: dict[str, str | int | None]) -> ToolCheck:
    """The instance quota against what the first deploy and every later update need."""
    low = int(context["minInstances"] or DEFAULT_MIN_INSTANCES)
    high = int(context["maxInstances"] or DEFAULT_MAX_INSTANCES)
    return check_endpoint_quota(target=target, instance_type=str(context["instanceType"]),
                                min_instances=low, max_instances=high)


def deployed_context(target: AwsTarget) -> dict[str, str | int | None] | None:
    """The context the deployed Endpoint stack was synthesized with (its DeployContext output)."""
    raw = stack_outputs(get_stack(target.client("cloudformation"), ENDPOINT_STACK)).get("DeployContext")
    if not raw:
        return None
    loaded = json.loads(raw)
    return {str(k): v for k, v in loaded.items() if isinstance(v, str | int)}
