"""Changing the endpoint's instance type while Application Auto Scaling manages its variant.

AWS (endpoint-scaling-update): "If the update would change the instance type for any model that
is a target for auto scaling, the update fails." So a type change takes three steps:
1. deregister the variant (this also deletes its scaling policies);
2. `cdk deploy -c autoscaling=false`: the endpoint moves to the new type and CloudFormation drops
   its (already deregistered) scaling resources, so its records match reality again;
3. `cdk deploy`: CloudFormation registers the target and creates the policy afresh, whatever in
   them changed in the same deploy.
If step 2 fails, CloudFormation rolls back to the old template, which still holds the scaling
resources: :func:`restore_from_stack` registers them again as that template states them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from cli.aws import AwsTarget, is_client_error
from infra.defaults import VARIANT_NAME

AUTOSCALING_KEY = "autoscaling"  # infra/config.py's context key (deploy-only, not in cdk.json)
NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
_TARGET_TYPE = "AWS::ApplicationAutoScaling::ScalableTarget"
_POLICY_TYPE = "AWS::ApplicationAutoScaling::ScalingPolicy"


def resource_id(endpoint: str) -> str:
    return f"endpoint/{endpoint}/variant/{VARIANT_NAME}"


def deployed_instance_type(*, target: AwsTarget, endpoint: str) -> str | None:
    """The instance type the endpoint runs now (None when there is no such endpoint)."""
    sm = target.client("sagemaker")
    try:
        config_name = sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
    except ClientError as exc:
        if is_client_error(exc, "ValidationException", "ResourceNotFound"):
            return None
        raise
    variants = sm.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"]
    for variant in variants:
        if variant.get("VariantName") == VARIANT_NAME:
            return str(variant.get("InstanceType")) or None
    return None


def is_registered(*, target: AwsTarget, endpoint: str) -> bool:
    found = target.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace=NAMESPACE, ResourceIds=[resource_id(endpoint)], ScalableDimension=DIMENSION)
    return bool(found.get("ScalableTargets"))


@dataclass(frozen=True)
class Release:
    """What `release_for_instance_change` did, for the progress output."""

    endpoint: str
    old_type: str
    new_type: str
    policies: tuple[str, ...]


def release_for_instance_change(*, target: AwsTarget, endpoint: str, instance_type: str) -> Release | None:
    """Deregister the variant when the deploy would change its instance type; None otherwise."""
    current = deployed_instance_type(target=target, endpoint=endpoint)
    if current is None or current == instance_type or not is_registered(target=target, endpoint=endpoint):
        return None
    aas = target.client("application-autoscaling")
    policies = aas.describe_scaling_policies(
        ServiceNamespace=NAMESPACE, ResourceId=resource_id(endpoint), ScalableDimension=DIMENSION)
    names = tuple(p["PolicyName"] for p in policies.get("ScalingPolicies", []))
    # Deregistering also deletes the target's scaling policies (Application Auto Scaling API).
    aas.deregister_scalable_target(
        ServiceNamespace=NAMESPACE, ResourceId=resource_id(endpoint), ScalableDimension=DIMENSION)
    return Release(endpoint=endpoint, old_type=current, new_type=instance_type, policies=names)


def restore_from_stack(*, target: AwsTarget, stack: str, endpoint: str) -> list[str]:
    """Register the target and put its policies as the deployed ``stack`` template defines them."""
    if is_registered(target=target, endpoint=endpoint):
        return []  # CloudFormation registered it itself (its properties changed in this deploy)
    body = target.client("cloudformation").get_template(StackName=stack)["TemplateBody"]
    resources: dict[str, Any] = body.get("Resources", {}) if isinstance(body, dict) else {}
    aas = target.client("application-autoscaling")
    done: list[str] = []
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource.get("Type") == _TARGET_TYPE and props.get("ResourceId") == resource_id(endpoint):
            aas.register_scalable_target(
                ServiceNamespace=NAMESPACE, ResourceId=resource_id(endpoint), ScalableDimension=DIMENSION,
                MinCapacity=int(props["MinCapacity"]), MaxCapacity=int(props["MaxCapacity"]))
            done.append(f"registered {resource_id(endpoint)} ({props['MinCapacity']}-{props['MaxCapacity']} instances)")
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource.get("Type") == _POLICY_TYPE and done:
            aas.put_scaling_policy(
                PolicyName=props["PolicyName"], ServiceNamespace=NAMESPACE, ResourceId=resource_id(endpoint),
                ScalableDimension=DIMENSION, PolicyType=props["PolicyType"],
                TargetTrackingScalingPolicyConfiguration=_numbers(props["TargetTrackingScalingPolicyConfiguration"]))
            done.append(f"policy {props['PolicyName']} restored")
    return done


def _numbers(config: dict[str, Any]) -> dict[str, Any]:
    """A template's JSON may carry numbers as strings; the API wants them typed."""
    out = dict(config)
    out["TargetValue"] = float(out["TargetValue"])
    for key in ("ScaleInCooldown", "ScaleOutCooldown"):
        if key in out:
            out[key] = int(out[key])
    return out
