"""Helpers for the CLI tests: build what the infra would have deployed, directly in moto.

Also imported by clitest_fake_cdk.py, the stand-in for the CDK CLI that tests put on PATH.
"""

from __future__ import annotations

import ast
import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import boto3

from infra.defaults import shared_defaults

ACCOUNT = "123456789012"
REVISION = shared_defaults()["modelRevision"]  # cdk.json, via the one reader both CLIs use
ASSET_REPO = f"cdk-hnb659fds-container-assets-{ACCOUNT}-us-east-1"
TTS_IMAGE_TAG = "a" * 64
AGENT_IMAGE_TAG = "b" * 64
CACHE_BUCKET = "kokoro-model-cache-test"
LOG_BUCKET = "kokoro-model-cache-logs-test"


class _Clients:
    """Cached clients (the moto URL and test credentials are the same for the whole session)."""

    def __init__(self, region: str) -> None:
        self.region = region

    def client(self, service: str) -> Any:
        return _client(self.region, service)


@functools.cache
def _client(region: str, service: str) -> Any:
    return boto3.Session(region_name=region).client(service)


def session(region: str = "us-east-1") -> _Clients:
    return _Clients(region)


def image_uri_sub(tag: str) -> dict[str, str]:
    """An asset image URI the way CDK synthesizes it (Fn::Sub with account/region)."""
    return {
        "Fn::Sub": "${AWS::AccountId}.dkr.ecr.${AWS::Region}.${AWS::URLSuffix}/"
        "cdk-hnb659fds-container-assets-${AWS::AccountId}-${AWS::Region}:" + tag
    }


DEFAULT_MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"  # cdk.json's, as the app would use it
SCALING_ID = "endpoint/{}/variant/AllTraffic"
SCALING_DIMENSION = "sagemaker:variant:DesiredInstanceCount"


def create_stack(
    name: str,
    *,
    outputs: dict[str, Any],
    resources: dict[str, Any] | None = None,
    region: str = "us-east-1",
) -> None:
    """Create ``name``, or update it in place when it exists (as `cdk deploy` does)."""
    template = {
        "Resources": resources or {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    cfn = session(region).client("cloudformation")
    if name in stack_names(region):
        cfn.update_stack(StackName=name, TemplateBody=json.dumps(template))
    else:
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))


def put_template(name: str, template: Mapping[str, Any], region: str = "us-east-1") -> None:
    """Create or update ``name`` from a full template (a synthesized one, IAM included)."""
    cfn = session(region).client("cloudformation")
    args = {"StackName": name, "TemplateBody": json.dumps(template), "Capabilities": ["CAPABILITY_IAM"]}
    if name in stack_names(region):
        cfn.update_stack(**args)
    else:
        cfn.create_stack(**args)


def agent_role_bedrock_grants(region: str = "us-east-1") -> set[str]:
    """Resources of bedrock:* statements in the inline policies of the agent role moto's IAM holds."""
    iam = session(region).client("iam")
    grants: set[str] = set()
    for role in iam.list_roles()["Roles"]:
        if "AgentRuntimeRole" not in role["RoleName"]:
            continue
        for policy in iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]:
            document = iam.get_role_policy(RoleName=role["RoleName"], PolicyName=policy)["PolicyDocument"]
            if isinstance(document, str):
                document = ast.literal_eval(document)  # moto's CloudFormation stores a Python repr
            for statement in document["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if any(a.startswith("bedrock:") for a in actions):
                    resources = statement["Resource"]
                    grants |= set(resources if isinstance(resources, list) else [resources])
    return grants


def foundation_model(region: str = "us-east-1") -> str | None:
    """The BedrockModelId output of the deployed foundation (the model its agent role may invoke)."""
    stack = session(region).client("cloudformation").describe_stacks(StackName="KokoroTtsFoundation")["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}.get("BedrockModelId")


def deploy_foundation(region: str = "us-east-1", *, bedrock_model_id: str = DEFAULT_MODEL,
                      runtime_name: str | None = None) -> None:
    create_stack(
        "KokoroTtsFoundation",
        region=region,
        outputs={
            "SageMakerRoleArn": f"arn:aws:iam::{ACCOUNT}:role/kokoro-sagemaker",
            "AgentRuntimeRoleArn": f"arn:aws:iam::{ACCOUNT}:role/kokoro-agent",
            "InvokePolicyArn": f"arn:aws:iam::{ACCOUNT}:policy/kokoro-invoke",
            "BedrockModelId": bedrock_model_id,
            **({"AgentRuntimeName": runtime_name} if runtime_name else {}),
        },
    )


def deploy_model_cache(revision: str = REVISION) -> None:
    create_stack(
        "KokoroTtsModelCache",
        resources={
            # RETAIN, as in infra/model_cache.py: CloudFormation leaves both buckets behind.
            "Bucket": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain",
                       "Properties": {"BucketName": CACHE_BUCKET}},
            "Logs": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain", "Properties": {"BucketName": LOG_BUCKET}},
        },
        outputs={
            "BucketName": {"Ref": "Bucket"},
            "ModelPrefix": f"models/kokoro-82m/{revision}/",
            "LogBucketName": {"Ref": "Logs"},
        },
    )


def scaling_resources(name: str, *, low: int = 1, high: int = 2) -> dict[str, Any]:
    """The two autoscaling resources as the synthesized endpoint template declares them."""
    return {
        "ScalableTarget": {"Type": "AWS::ApplicationAutoScaling::ScalableTarget", "Properties": {
            "ServiceNamespace": "sagemaker", "ResourceId": SCALING_ID.format(name),
            "ScalableDimension": SCALING_DIMENSION, "MinCapacity": low, "MaxCapacity": high}},
        "ConcurrentRequestsPolicy": {"Type": "AWS::ApplicationAutoScaling::ScalingPolicy", "Properties": {
            "PolicyName": f"{name}-concurrent-requests-per-model", "PolicyType": "TargetTrackingScaling",
            "ScalingTargetId": {"Ref": "ScalableTarget"},
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": 8, "ScaleInCooldown": 600, "ScaleOutCooldown": 120,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"}}}},
    }


def register_scaling(resources: dict[str, Any]) -> None:
    """What CloudFormation does for the two resources (moto's CloudFormation skips them)."""
    aas = session().client("application-autoscaling")
    target = resources["ScalableTarget"]["Properties"]
    aas.register_scalable_target(**target)
    policy = dict(resources["ConcurrentRequestsPolicy"]["Properties"])
    del policy["ScalingTargetId"]
    aas.put_scaling_policy(ServiceNamespace="sagemaker", ResourceId=target["ResourceId"],
                           ScalableDimension=SCALING_DIMENSION, **policy)


def scaling_state(name: str = "kokoro-tts") -> tuple[list[dict[str, Any]], list[str]]:
    """(registered targets, policy names) for the endpoint's variant in Application Auto Scaling."""
    aas = session().client("application-autoscaling")
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[SCALING_ID.format(name)])
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=SCALING_ID.format(name))
    return targets["ScalableTargets"], [p["PolicyName"] for p in policies["ScalingPolicies"]]


def endpoint_instance_type(name: str = "kokoro-tts") -> str | None:
    sm = session().client("sagemaker")
    try:
        config = sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    except sm.exceptions.ClientError:
        return None
    return str(sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]["InstanceType"])


def deploy_endpoint(
    name: str = "kokoro-tts", instance_type: str = "ml.m5.xlarge", *, autoscaling: bool = False,
    deploy_context: str | None = None,
) -> None:
    """Create the endpoint (or, moto having no update_endpoint, recreate it on a new instance type)
    and its stack; register or drop autoscaling as CloudFormation would for the template.
    ``deploy_context``: the stack's DeployContext output (JSON), as the real stack writes it."""
    sm = session().client("sagemaker")
    suffix = instance_type.replace(".", "-")
    current = endpoint_instance_type(name)
    if current != instance_type:
        if current is not None:
            sm.delete_endpoint(EndpointName=name)
        sm.create_model(
            ModelName=f"{name}-model-{suffix}",
            ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/kokoro-sagemaker",
            PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{ASSET_REPO}:{TTS_IMAGE_TAG}"},
        )
        sm.create_endpoint_config(
            EndpointConfigName=f"{name}-config-{suffix}",
            ProductionVariants=[
                {
                    "VariantName": "AllTraffic",
                    "ModelName": f"{name}-model-{suffix}",
                    "InitialInstanceCount": 1,
                    "InstanceType": instance_type,
                }
            ],
        )
        sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config-{suffix}")
    scaling = scaling_resources(name) if autoscaling else {}
    create_stack(
        "KokoroTtsEndpoint",
        resources={"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}, **scaling},
        outputs={"EndpointName": name, "ModelName": f"{name}-model-{suffix}", "Image": image_uri_sub(TTS_IMAGE_TAG),
                 **({"DeployContext": deploy_context} if deploy_context else {})},
    )
    registered = bool(scaling_state(name)[0])
    if scaling and not registered:
        register_scaling(scaling)
    elif not scaling and registered:
        session().client("application-autoscaling").deregister_scalable_target(
            ServiceNamespace="sagemaker", ResourceId=SCALING_ID.format(name), ScalableDimension=SCALING_DIMENSION)


def deploy_agent_runtime(*, runtime_id: str | None = None) -> str:
    """Create the runtime in moto's AgentCore (unless an id is forced) and the stack; returns the id."""
    if runtime_id is None:
        created = session().client("bedrock-agentcore-control").create_agent_runtime(
            agentRuntimeName="kokoro_voice_agent",
            agentRuntimeArtifact={
                "containerConfiguration": {
                    "containerUri": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{ASSET_REPO}:{AGENT_IMAGE_TAG}"
                }
            },
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/kokoro-agent",
            networkConfiguration={"networkMode": "PUBLIC"},
        )
        runtime_id, arn = created["agentRuntimeId"], created["agentRuntimeArn"]
    else:
        arn = f"arn:aws:bedrock-agentcore:us-east-1:{ACCOUNT}:runtime/{runtime_id}"
    create_stack(
        "KokoroAgentRuntime",
        outputs={
            "RuntimeArn": arn,
            "RuntimeId": runtime_id,
            "RuntimeName": "kokoro_voice_agent",
            "Image": image_uri_sub(AGENT_IMAGE_TAG),
        },
    )
    return runtime_id


def put_bootstrap_param(region: str = "us-east-1") -> None:
    session(region).client("ssm").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String"
    )


def push_image(tag: str, repo: str = ASSET_REPO) -> None:
    ecr = session().client("ecr")
    try:
        ecr.create_repository(repositoryName=repo)
    except ecr.exceptions.RepositoryAlreadyExistsException:
        pass
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 1,
                   "digest": "sha256:" + tag[:64].ljust(64, "0")},
        "layers": [],
    }
    ecr.put_image(repositoryName=repo, imageManifest=json.dumps(manifest), imageTag=tag)


def image_tags(repo: str = ASSET_REPO) -> set[str]:
    images = session().client("ecr").list_images(repositoryName=repo)["imageIds"]
    return {i["imageTag"] for i in images if "imageTag" in i}


def stack_names(region: str = "us-east-1") -> set[str]:
    stacks = session(region).client("cloudformation").list_stacks()["StackSummaries"]
    return {s["StackName"] for s in stacks if s["StackStatus"] != "DELETE_COMPLETE"}


def make_model_dir(root: Path, *, weights: bytes | None = None) -> Path:
    """A small directory laid out like hexgrad/Kokoro-82M, plus a file the sync must skip."""
    (root / "voices").mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({"n_token": 178, "istftnet": {}}))
    (root / "kokoro-v1_0.pth").write_bytes(weights if weights is not None else os.urandom(20_000))
    (root / "voices" / "af_heart.pt").write_bytes(os.urandom(3_000))
    (root / "voices" / "x.pt").write_bytes(os.urandom(1_500))
    (root / "README.md").write_text("not part of the model\n")
    return root
