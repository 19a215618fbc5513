"""Helpers for the CLI tests: build what the infra would have deployed, directly in moto.

Also imported by clitest_fake_cdk.py, the stand-in for the CDK CLI that tests put on PATH.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import boto3

ACCOUNT = "123456789012"
REVISION = "f3ff3571791e39611d31c381e3a41a3af07b4987"
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
    return boto3.Session(region_name=region).client(service)  # type: ignore[call-overload]


def session(region: str = "us-east-1") -> _Clients:
    return _Clients(region)


def image_uri_sub(tag: str) -> dict[str, str]:
    """An asset image URI the way CDK synthesizes it (Fn::Sub with account/region)."""
    return {
        "Fn::Sub": "${AWS::AccountId}.dkr.ecr.${AWS::Region}.${AWS::URLSuffix}/"
        "cdk-hnb659fds-container-assets-${AWS::AccountId}-${AWS::Region}:" + tag
    }


def create_stack(
    name: str,
    *,
    outputs: dict[str, Any],
    resources: dict[str, Any] | None = None,
    region: str = "us-east-1",
) -> None:
    template = {
        "Resources": resources or {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    session(region).client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


def deploy_foundation(region: str = "us-east-1") -> None:
    create_stack(
        "KokoroTtsFoundation",
        region=region,
        outputs={
            "SageMakerRoleArn": f"arn:aws:iam::{ACCOUNT}:role/kokoro-sagemaker",
            "AgentRuntimeRoleArn": f"arn:aws:iam::{ACCOUNT}:role/kokoro-agent",
            "InvokePolicyArn": f"arn:aws:iam::{ACCOUNT}:policy/kokoro-invoke",
        },
    )


def deploy_model_cache(revision: str = REVISION) -> None:
    create_stack(
        "KokoroTtsModelCache",
        resources={
            "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": CACHE_BUCKET}},
            "Logs": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": LOG_BUCKET}},
        },
        outputs={
            "BucketName": {"Ref": "Bucket"},
            "ModelPrefix": f"models/kokoro-82m/{revision}/",
            "LogBucketName": {"Ref": "Logs"},
        },
    )


def deploy_endpoint(name: str = "kokoro-tts", instance_type: str = "ml.m5.xlarge") -> None:
    sm = session().client("sagemaker")
    sm.create_model(
        ModelName=f"{name}-model",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/kokoro-sagemaker",
        PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{ASSET_REPO}:{TTS_IMAGE_TAG}"},
    )
    sm.create_endpoint_config(
        EndpointConfigName=f"{name}-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{name}-model",
                "InitialInstanceCount": 1,
                "InstanceType": instance_type,
            }
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")
    create_stack(
        "KokoroTtsEndpoint",
        outputs={"EndpointName": name, "ModelName": f"{name}-model", "Image": image_uri_sub(TTS_IMAGE_TAG)},
    )


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
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 1, "digest": "sha256:" + tag[:64].ljust(64, "0")},
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
