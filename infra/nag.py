"""cdk-nag AwsSolutions checks and the findings this design accepts, each with its reason.

cdk-nag 3 runs as a CDK policy-validation plugin: an unacknowledged finding (error or warning)
fails ``app.synth()`` and is written to validation-report.json in the cloud assembly.
Acknowledgements name exact finding ids (``AwsSolutions-IAM5[Resource::...]``) on the one
construct they concern, so a new wildcard anywhere else still fails synthesis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from aws_cdk import Acknowledgment, CfnElement, Stack, Token, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from infra.foundation import AGENTCORE_METRIC_NAMESPACE

if TYPE_CHECKING:
    from infra.app import KokoroApp

IAM5: Final = "AwsSolutions-IAM5"

REASON_STAR_RESOURCE: Final = (
    "Resource '*' only for actions that support no resource-level permissions: "
    "ecr:GetAuthorizationToken, cloudwatch:PutMetricData (limited by a cloudwatch:namespace "
    "condition) and, for the agent, X-Ray PutTraceSegments/PutTelemetryRecords/GetSampling*.")
REASON_LOG_STREAMS: Final = (
    "Log stream names are generated per instance/session at run time; the grant is limited to "
    "streams of the one log group this service writes.")


def apply(built: KokoroApp) -> None:
    """Register AwsSolutionsChecks on the app and acknowledge the accepted findings."""
    Validations.of(built.app).add_plugins(AwsSolutionsChecks(built.app, verbose=True))
    settings = built.settings
    sagemaker_role = built.foundation.sagemaker_role
    agent_role = built.foundation.agent_role

    logs = _arn_prefix(built.foundation, "logs")
    _ack(sagemaker_role, "Resource::*", REASON_STAR_RESOURCE)
    _ack(sagemaker_role,
         f"Resource::{logs}:log-group:/aws/sagemaker/Endpoints/{settings.endpoint_name}:log-stream:*",
         REASON_LOG_STREAMS)

    runtime_logs = f"{logs}:log-group:/aws/bedrock-agentcore/runtimes/{settings.agent_runtime_name}-*"
    _ack(agent_role, "Resource::*", REASON_STAR_RESOURCE + " Metric namespace: "
         + AGENTCORE_METRIC_NAMESPACE + ".")
    _ack(agent_role, f"Resource::{runtime_logs}",
         "AgentCore names the runtime's log groups <runtimeName>-<generated id>-<endpoint>; the "
         "id is only known after creation, so the grant is every group of this runtime name.")
    _ack(agent_role, f"Resource::{runtime_logs}:log-stream:*", REASON_LOG_STREAMS)
    _ack(agent_role, f"Resource::{logs}:log-group:*",
         "logs:DescribeLogGroups is a list operation that is only authorized on log-group:*; "
         "it is the sole action on that resource (read-only metadata).")
    _ack(agent_role,
         f"Resource::{_arn_prefix(built.foundation, 'bedrock-agentcore')}:"
         f"workload-identity-directory/default/workload-identity/{settings.agent_runtime_name}-*",
         "AgentCore creates the runtime's workload identity with a generated suffix; the grant "
         "covers only identities of this runtime name (token retrieval, no management).")
    if settings.bedrock_geo is not None:
        model = settings.bedrock_foundation_model
        partition = _literal(built.foundation.partition, "AWS::Partition")
        _ack(agent_role, f"Resource::arn:{partition}:bedrock:*::foundation-model/{model}",
             "A cross-Region inference profile may route to this model in any Region of its "
             "geography; the statement names one model and requires bedrock:InferenceProfileArn "
             "to be the configured profile.")

    for stack in built.stacks:
        _ack(built.foundation.diff_policy,
             f"Resource::{_arn_prefix(built.foundation, 'cloudformation')}:stack/{stack.stack_name}/*",
             "A stack ARN ends with the id CloudFormation generates at creation; the grant names the "
             "stack and is read-only (DescribeStacks, GetTemplate).")

    cache = built.model_cache
    bucket = cache.bucket.node.default_child
    assert isinstance(bucket, CfnElement)
    _ack(cache.reader_policy,
         f"Resource::<{cache.get_logical_id(bucket)}.Arn>/{settings.model_prefix}*",
         "SageMaker copies every object under the pinned revision's prefix to /opt/ml/model "
         "(S3Prefix data source); the grant is that one prefix, read-only.")


def _literal(value: str, pseudo: str) -> str:
    """How cdk-nag prints a value in a finding id: unresolved pseudo parameters as <AWS::X>."""
    return f"<{pseudo}>" if Token.is_unresolved(value) else value


def _arn_prefix(stack: Stack, service: str) -> str:
    """``arn:<partition>:<service>:<region>:<account>`` as it appears in finding ids, for both
    environment-agnostic synthesis (tests, snapshots) and a concrete env (cdk diff/deploy)."""
    return (f"arn:{_literal(stack.partition, 'AWS::Partition')}:{service}:"
            f"{_literal(stack.region, 'AWS::Region')}:{_literal(stack.account, 'AWS::AccountId')}")


def _ack(construct: IConstruct, finding: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{IAM5}[{finding}]", reason=reason))
