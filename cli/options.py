"""Typer option declarations shared by `deploy-tts` and `deploy-agent`, so both spell them alike."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from infra.defaults import shared_defaults

DEFAULT_INSTANCE_TYPE: str = shared_defaults()["instanceType"]
DEFAULT_ENDPOINT_NAME: str = shared_defaults()["endpointName"]
DEFAULT_REVISION: str = shared_defaults()["modelRevision"]
DEFAULT_RUNTIME_NAME: str = shared_defaults()["agentRuntimeName"]


class Engine(StrEnum):
    """Inference engine inside the Kokoro container."""

    torch = "torch"
    onnx = "onnx"


Region = Annotated[
    str | None,
    typer.Option("--region", help="AWS region (default: AWS_REGION or the profile's region)."),
]
Profile = Annotated[
    str | None,
    typer.Option("--profile", help="Named profile from ~/.aws/config (default: AWS_PROFILE or default chain)."),
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
JsonOutput = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
WaitTimeout = Annotated[
    int,
    typer.Option("--wait-timeout", min=1, help="Seconds to wait for the endpoint/runtime/stack deletion."),
]
KEPT = "default: the deployed setting (the Endpoint stack's DeployContext), else cdk.json's"
InstanceType = Annotated[
    str | None,
    typer.Option("--instance-type", help=f"SageMaker instance type (cdk context instanceType; {KEPT})."),
]
PlannedInstanceType = Annotated[str, typer.Option("--instance-type", help="SageMaker instance type to plan for.")]
EngineOpt = Annotated[Engine | None, typer.Option("--engine", help=f"Inference engine (cdk context engine; {KEPT}).")]
EndpointName = Annotated[
    str | None,
    typer.Option("--endpoint-name", help=f"SageMaker endpoint name (cdk context endpointName; {KEPT})."),
]
MinInstances = Annotated[
    int | None,
    typer.Option("--min-instances", help=f"Autoscaling minimum, at least 1 (cdk context minInstances; {KEPT})."),
]
MaxInstances = Annotated[
    int | None,
    typer.Option("--max-instances", help=f"Autoscaling maximum (cdk context maxInstances; {KEPT})."),
]
ModelRevision = Annotated[
    str | None,
    typer.Option("--model-revision", help=f"hexgrad/Kokoro-82M revision to cache (cdk context modelRevision; {KEPT})."),
]
BedrockModelId = Annotated[
    str | None,
    typer.Option("--bedrock-model-id", help="Bedrock model for the agent (cdk context bedrockModelId; default: the "
                 "deployed foundation's, else cdk.json's model as the inference profile of the region)."),
]


def target_flags(region: str | None, profile: str | None) -> str:
    """The --region/--profile flags to repeat in a suggested next command."""
    return (f" --region {region}" if region else "") + (f" --profile {profile}" if profile else "")


DeleteImages = Annotated[
    bool, typer.Option("--delete-images", help="Also delete from ECR the CDK asset images of the stacks it deletes."),
]
FailOnDiff = Annotated[bool, typer.Option("--fail", help="Exit non-zero when there are differences.")]
AlarmEmail = Annotated[
    str | None,
    typer.Option("--alarm-email", help="Subscribe this address to the endpoint's alarm topic (SNS mails a "
                 f"confirmation link first; cdk context alarmEmail; {KEPT}); --alarm-email '' removes it."),
]
DEFAULT_MIN_INSTANCES: int = shared_defaults()["minInstances"]
DEFAULT_MAX_INSTANCES: int = shared_defaults()["maxInstances"]
