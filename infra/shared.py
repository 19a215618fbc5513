"""Names, ARNs and policy statements more than one stack needs.

ARNs are built from ``Stack.of(scope)`` pseudo parameters, so the stacks stay environment
agnostic (synth needs no account) while every policy is still scoped to one account and Region.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import IConstruct

# Both images build from the repository root: their Dockerfiles COPY the shared voicestream/.
# Re-exported for the stacks (``X as X`` marks the re-export for mypy).
from infra.defaults import REPO_ROOT as REPO_ROOT
from infra.defaults import STACK_AGENT as STACK_AGENT
from infra.defaults import STACK_ENDPOINT as STACK_ENDPOINT
from infra.defaults import STACK_FOUNDATION as STACK_FOUNDATION
from infra.defaults import STACK_MODEL_CACHE as STACK_MODEL_CACHE
from infra.defaults import VARIANT_NAME as VARIANT_NAME

SAGEMAKER_INVOKE_ACTIONS: Final = (
    "sagemaker:InvokeEndpoint",
    "sagemaker:InvokeEndpointWithResponseStream",
    "sagemaker:InvokeEndpointWithBidirectionalStream",
)

# Paths neither image needs. The root .dockerignore is applied too; these repeat its heavy
# entries so asset hashing never walks virtualenvs, models or build output even if it changes.
_COMMON_IMAGE_EXCLUDES: Final = (
    ".git", ".github", ".ci", ".venv*", "cdk.out", "cdk.context.json", "models", "node_modules",
    "**/__pycache__", "**/.pytest_cache", "**/.hypothesis", "**/*.egg-info",
    "tests", "docs", "infra", "cli", "bench", "scripts",
)
TTS_IMAGE_EXCLUDES: Final = (*_COMMON_IMAGE_EXCLUDES, "agent")
"""The TTS image copies containers/kokoro and voicestream; agent edits must not rebuild it."""
AGENT_IMAGE_EXCLUDES: Final = (*_COMMON_IMAGE_EXCLUDES, "containers")
"""The agent image copies agent/ and voicestream; TTS edits must not rebuild it."""


def endpoint_arn(scope: IConstruct, endpoint_name: str) -> str:
    """ARN of the one TTS endpoint; SageMaker lowercases resource names inside its ARNs."""
    return Stack.of(scope).format_arn(
        service="sagemaker", resource="endpoint", resource_name=endpoint_name.lower()
    )


def invoke_endpoint_statement(scope: IConstruct, endpoint_name: str) -> iam.PolicyStatement:
    """The three invoke actions (plain, response stream, bidirectional stream), this endpoint only."""
    return iam.PolicyStatement(
        sid="InvokeTtsEndpoint",
        actions=list(SAGEMAKER_INVOKE_ACTIONS),
        resources=[endpoint_arn(scope, endpoint_name)],
    )


def asset_repository_arn(scope: IConstruct, qualifier: str) -> str:
    """The CDK bootstrap repository that receives both image assets (default synthesizer)."""
    stack = Stack.of(scope)
    name = f"cdk-{qualifier}-container-assets-{stack.account}-{stack.region}"
    return stack.format_arn(service="ecr", resource="repository", resource_name=name)


def ecr_pull_statements(scope: IConstruct, qualifier: str) -> list[iam.PolicyStatement]:
    """Pull from the asset repository; the registry token call cannot be scoped."""
    return [
        iam.PolicyStatement(
            sid="PullImageAssets",
            actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            resources=[asset_repository_arn(scope, qualifier)],
        ),
        iam.PolicyStatement(
            sid="EcrAuthorizationToken",
            actions=["ecr:GetAuthorizationToken"],
            # Resource "*" is required: GetAuthorizationToken is a registry-wide call that
            # supports no resource-level permissions (Service Authorization Reference).
            resources=["*"],
        ),
    ]


def log_group_arn(scope: IConstruct, log_group_name: str) -> str:
    return Stack.of(scope).format_arn(
        service="logs", resource="log-group", resource_name=log_group_name,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def log_writer_statements(log_group: str, *, group_sid: str, stream_sid: str) -> list[iam.PolicyStatement]:
    """Create and describe one log group, and write its streams (named at run time, hence ``*``)."""
    return [
        iam.PolicyStatement(
            sid=group_sid, actions=["logs:CreateLogGroup", "logs:DescribeLogStreams"], resources=[log_group],
        ),
        iam.PolicyStatement(
            sid=stream_sid, actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[f"{log_group}:log-stream:*"],
        ),
    ]


def put_metric_data_statement(*namespaces: str) -> iam.PolicyStatement:
    """PutMetricData has no resource type, so the namespace condition is what scopes it."""
    return iam.PolicyStatement(
        sid="PutMetricDataOwnNamespace",
        actions=["cloudwatch:PutMetricData"],
        # Resource "*" is required: cloudwatch:PutMetricData supports no resource-level
        # permissions; the cloudwatch:namespace condition limits it to the service's namespace.
        resources=["*"],
        conditions={"StringEquals": {"cloudwatch:namespace": list(namespaces)}},
    )
