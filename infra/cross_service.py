"""Every cross-service call the deployment relies on, and the ones it must refuse, as data.

One row per (caller, action, resource, request context) with the decision the synthesized
templates must give: tests/infra/test_infra_cross_service.py evaluates each row against the
templates' identity and resource policies (infra/iam_eval.py) and fails when a row's decision
differs, or when the templates allow anything no allowed row accounts for. docs/infrastructure.md
lists the rows with AWS's document for each, or says the row is our assumption.

Callers: ``service:<principal>`` (a service acting through a resource policy), ``role:<logical id
prefix>`` (a role of the foundation stack), ``policy:<logical id prefix>`` (a managed policy the
stacks create for you to attach: whoever holds it), ``aws-managed:<name>`` (a service-linked
role's AWS managed policy, quoted in :data:`AWS_MANAGED_POLICIES`). Names CloudFormation generates
appear as ``{<logical id prefix>}`` (``{ModelBucket}``, ``{AgentRuntimeRole}``); the test fills
them from the templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from infra.config import Settings
from infra.defaults import STACK_AGENT, STACK_ENDPOINT, STACK_FOUNDATION, STACK_MODEL_CACHE
from infra.observability import ALARM_SUFFIXES, ROLLBACK_ALARMS, alarm_name, topic_name
from infra.shared import SAGEMAKER_INVOKE_ACTIONS
from infra.voice_metrics import log_group_name

Expect = Literal["allow", "explicit-deny", "implicit-deny"]

ASSUMPTION: Final = "our assumption"
EVALUATION_LOGIC: Final = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html"
SNS_ALARMS: Final = "https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger"
CREATE_MODEL: Final = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModel.html"
ROLLBACK: Final = "https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html"
SAGEMAKER_LOGS: Final = "https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html"
AGENTCORE_ROLE: Final = "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/runtime-permissions.html"
WORKLOAD_TOKEN: Final = "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/get-workload-access-token.html"
PROFILES: Final = "https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-prereq.html"
MODEL_ACCESS: Final = "https://docs.aws.amazon.com/bedrock/latest/userguide/model-access.html"
SCALING_POLICY: Final = ("https://docs.aws.amazon.com/aws-managed-policy/latest/reference/"
                         "AWSApplicationAutoscalingSageMakerEndpointPolicy.html")
ACCESS_LOGS: Final = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html"
CDK_DIFF: Final = "https://docs.aws.amazon.com/cdk/v2/guide/ref-cli-cmd-diff.html"

AWS_MANAGED_POLICIES: Final[Mapping[str, Mapping[str, Any]]] = {
    # v2 (2023-11-13), as AWS publishes it (SCALING_POLICY). The scalable target sets no RoleARN, so
    # Application Auto Scaling acts through its SageMaker service-linked role holding this policy.
    "AWSApplicationAutoscalingSageMakerEndpointPolicy": {"Statement": [
        {"Sid": "SageMaker", "Effect": "Allow", "Resource": ["*"], "Action": [
            "sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig",
            "sagemaker:DescribeInferenceComponent", "sagemaker:UpdateEndpointWeightsAndCapacities",
            "sagemaker:UpdateInferenceComponentRuntimeConfig", "cloudwatch:DescribeAlarms",
            "cloudwatch:GetMetricData"]},
        {"Sid": "SageMakerCloudWatchUpdate", "Effect": "Allow", "Action": [
            "cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"],
         "Resource": ["arn:aws:cloudwatch:*:*:alarm:TargetTracking*"]},
    ]},
}


@dataclass(frozen=True, kw_only=True)
class Call:
    """One call and the decision the templates must give it."""

    group: str
    caller: str
    action: str
    resource: str
    expect: Expect
    why: str
    source: str  # the AWS document that says so, or ASSUMPTION
    context: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Arns:
    """ARN builders for one account and Region."""

    account: str
    region: str
    partition: str = "aws"

    def of(self, service: str, resource: str, *, region: str | None = None, account: str | None = None) -> str:
        return (f"arn:{self.partition}:{service}:{self.region if region is None else region}:"
                f"{self.account if account is None else account}:{resource}")


TLS: Final = {"aws:SecureTransport": "true", "s3:TlsVersion": "1.3"}


def calls(settings: Settings, arns: Arns) -> tuple[Call, ...]:
    """The whole table for ``settings`` deployed to ``arns``' account and Region."""
    return (*_alarm_mail(settings, arns), *_sagemaker(settings, arns), *_agentcore(settings, arns),
            *_scaling(settings, arns), *_access_logs(arns), *_clients(settings, arns), *_ci(settings, arns))


def _alarm_mail(settings: Settings, arns: Arns) -> list[Call]:
    group, topic = "CloudWatch -> SNS", arns.of("sns", topic_name(settings.endpoint_name))
    alarm = {key: arns.of("cloudwatch", f"alarm:{alarm_name(settings.endpoint_name, key)}") for key in ALARM_SUFFIXES}
    rows = [Call(group=group, caller="service:cloudwatch.amazonaws.com", action="sns:Publish", resource=topic,
                 context={"aws:SourceArn": arn, "aws:SecureTransport": "true"}, expect="allow",
                 why=f"alarm {key} notifies the topic (mail to --alarm-email)", source=SNS_ALARMS)
            for key, arn in alarm.items()]
    return [*rows,
            Call(group=group, caller="service:cloudwatch.amazonaws.com", action="sns:Publish", resource=topic,
                 context={"aws:SourceArn": alarm["Errors"], "aws:SecureTransport": "false"}, expect="explicit-deny",
                 why="the topic's Deny: no publish without TLS", source=EVALUATION_LOGIC),
            Call(group=group, caller="service:cloudwatch.amazonaws.com", action="sns:Publish", resource=topic,
                 context={"aws:SourceArn": arns.of("cloudwatch", "alarm:someone-elses-alarm"),
                          "aws:SecureTransport": "true"}, expect="implicit-deny",
                 why="an alarm that is not the endpoint's may not use the topic (confused deputy)", source=SNS_ALARMS)]


def _ecr_pull(group: str, caller: str, settings: Settings, arns: Arns, why: str, source: str) -> list[Call]:
    repo = arns.of("ecr", f"repository/cdk-{settings.bootstrap_qualifier}-container-assets-{arns.account}-"
                   f"{arns.region}")
    pulls = [Call(group=group, caller=caller, action=action, resource=repo, expect="allow", why=why, source=source)
             for action in ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")]
    return [*pulls, Call(group=group, caller=caller, action="ecr:GetAuthorizationToken", resource="*",
                         expect="allow", why="registry login before the pull", source=source)]


def _logs(group: str, caller: str, log_group: str, arns: Arns, source: str) -> list[Call]:
    group_arn = arns.of("logs", f"log-group:{log_group}")
    return [Call(group=group, caller=caller, action=action, resource=resource, expect="allow",
                 why="container stdout/stderr to CloudWatch Logs", source=source)
            for action, resource in (("logs:CreateLogGroup", group_arn), ("logs:DescribeLogStreams", group_arn),
                                     ("logs:CreateLogStream", f"{group_arn}:log-stream:i-0abc"),
                                     ("logs:PutLogEvents", f"{group_arn}:log-stream:i-0abc"))]


def _sagemaker(settings: Settings, arns: Arns) -> list[Call]:
    group, role = "SageMaker endpoint", "role:SageMakerExecutionRole"
    role_arn = arns.of("iam", "role/{SageMakerExecutionRole}", region="")
    bucket = f"arn:{arns.partition}:s3:::{{ModelBucket}}"
    objects = f"{bucket}/{settings.model_prefix}"
    alarm = {key: arns.of("cloudwatch", f"alarm:{alarm_name(settings.endpoint_name, key)}") for key in ALARM_SUFFIXES}
    return [
        Call(group=group, caller="service:sagemaker.amazonaws.com", action="sts:AssumeRole", resource=role_arn,
             expect="allow", why="SageMaker runs the model as its execution role", source=CREATE_MODEL),
        *_ecr_pull(group, role, settings, arns, "pull the Kokoro image", CREATE_MODEL),
        Call(group=group, caller=role, action="s3:GetObject", resource=f"{objects}kokoro-v1_0.pth", context=TLS,
             expect="allow", why="copy the pinned revision to /opt/ml/model (S3Prefix)", source=CREATE_MODEL),
        Call(group=group, caller=role, action="s3:ListBucket", resource=bucket,
             context={**TLS, "s3:prefix": settings.model_prefix}, expect="allow",
             why="list the revision's prefix", source=CREATE_MODEL),
        Call(group=group, caller=role, action="s3:GetObject", resource=f"{objects}kokoro-v1_0.pth",
             context={"aws:SecureTransport": "false"}, expect="explicit-deny",
             why="the bucket's Deny: no read without TLS", source=EVALUATION_LOGIC),
        Call(group=group, caller=role, action="s3:GetObject", context=TLS,
             resource=f"{bucket}/models/kokoro-82m/another-revision/config.json",
             expect="implicit-deny", why="only the pinned revision", source=ASSUMPTION),
        *_logs(group, role, log_group_name(settings.endpoint_name), arns, SAGEMAKER_LOGS),
        *[Call(group=group, caller=role, action="cloudwatch:PutMetricData", resource="*",
               context={"cloudwatch:namespace": namespace}, expect="allow",
               why="container metrics", source=ASSUMPTION)
          for namespace in ("AWS/SageMaker", "/aws/sagemaker/Endpoints")],
        Call(group=group, caller=role, action="cloudwatch:PutMetricData", resource="*",
             context={"cloudwatch:namespace": "SomeoneElse"}, expect="implicit-deny",
             why="no other metric namespace", source=ASSUMPTION),
        *[Call(group=group, caller=role, action="cloudwatch:DescribeAlarms", resource=alarm[key], expect="allow",
               why="an update's bake period reads its rollback alarms", source=ROLLBACK) for key in ROLLBACK_ALARMS],
        Call(group=group, caller=role, action="cloudwatch:DescribeAlarms", resource=alarm["Saturation"],
             expect="implicit-deny", why="only the rollback alarms", source=ROLLBACK),
        Call(group=group, caller=role, action="kms:Decrypt", resource=arns.of("kms", "key/any"),
             expect="implicit-deny", why="no KMS: the bucket is SSE-S3, the topic unencrypted", source=ASSUMPTION),
    ]


def _bedrock(settings: Settings, arns: Arns, group: str, role: str) -> list[Call]:
    model, stream = settings.bedrock_foundation_model, "bedrock:InvokeModelWithResponseStream"
    profile = arns.of("bedrock", f"inference-profile/{settings.bedrock_model_id}")
    here = arns.of("bedrock", f"foundation-model/{model}", account="")
    streaming = Call(group=group, caller=role, action="bedrock:InvokeModel", resource=profile, expect="implicit-deny",
                     why="the agent streams; the non-streaming API is not granted", source=ASSUMPTION)
    if settings.bedrock_geo is None:
        return [streaming, Call(group=group, caller=role, action=stream, resource=here, expect="allow",
                                why="ConverseStream of the agent's model", source=PROFILES)]
    elsewhere = arns.of("bedrock", f"foundation-model/{model}", region="us-west-2", account="")
    return [
        streaming,
        Call(group=group, caller=role, action=stream, resource=profile, expect="allow",
             why="ConverseStream through the inference profile", source=PROFILES),
        Call(group=group, caller=role, action=stream, resource=elsewhere, expect="allow",
             context={"bedrock:InferenceProfileArn": profile},
             why="the model in a Region the profile routes to", source=PROFILES),
        Call(group=group, caller=role, action=stream, resource=here, expect="implicit-deny",
             why="the model only through the profile", source=PROFILES),
    ]


def _agentcore(settings: Settings, arns: Arns) -> list[Call]:
    group, role, name = "AgentCore runtime", "role:AgentRuntimeRole", settings.agent_runtime_name
    runtime = arns.of("bedrock-agentcore", f"runtime/{name}-AbC123dEf4")
    assume = Call(group=group, caller="service:bedrock-agentcore.amazonaws.com", action="sts:AssumeRole",
                  resource=arns.of("iam", "role/{AgentRuntimeRole}", region=""), expect="allow",
                  context={"aws:SourceAccount": arns.account, "aws:SourceArn": runtime},
                  why="AgentCore runs the agent as its execution role", source=AGENTCORE_ROLE)
    endpoint = arns.of("sagemaker", f"endpoint/{settings.endpoint_name}")
    groups = f"/aws/bedrock-agentcore/runtimes/{name}-AbC123dEf4-DEFAULT"
    directory = arns.of("bedrock-agentcore", "workload-identity-directory/default")
    return [
        assume,
        Call(group=group, caller=assume.caller, action="sts:AssumeRole", resource=assume.resource,
             context={"aws:SourceAccount": arns.account,
                      "aws:SourceArn": arns.of("bedrock-agentcore", "runtime/other-1")}, expect="implicit-deny",
             why="another runtime may not use the role (confused deputy)", source=AGENTCORE_ROLE),
        *_bedrock(settings, arns, group, role),
        *[Call(group=group, caller=role, action=action, resource=endpoint, expect="allow",
               why="speech from the TTS endpoint", source=ASSUMPTION) for action in SAGEMAKER_INVOKE_ACTIONS],
        *_ecr_pull(group, role, settings, arns, "pull the agent image", AGENTCORE_ROLE),
        *_logs(group, role, groups, arns, AGENTCORE_ROLE),
        Call(group=group, caller=role, action="logs:DescribeLogGroups", resource=arns.of("logs", "log-group:*"),
             expect="allow", why="the runtime's log set-up lists groups", source=AGENTCORE_ROLE),
        *[Call(group=group, caller=role, action=action, resource="*", expect="allow",
               why="OpenTelemetry traces", source=AGENTCORE_ROLE)
          for action in ("xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                         "xray:GetSamplingTargets")],
        Call(group=group, caller=role, action="cloudwatch:PutMetricData", resource="*",
             context={"cloudwatch:namespace": "bedrock-agentcore"}, expect="allow",
             why="runtime metrics", source=AGENTCORE_ROLE),
        *[Call(group=group, caller=role, action="bedrock-agentcore:GetWorkloadAccessToken", resource=resource,
               expect="allow", why="the token of a SigV4 invocation", source=AGENTCORE_ROLE)
          for resource in (directory, f"{directory}/workload-identity/{name}-AbC123dEf4")],
        Call(group=group, caller=role, action="bedrock-agentcore:GetWorkloadAccessTokenForUserId", resource=directory,
             expect="implicit-deny", why="no caller sends a runtime user id", source=WORKLOAD_TOKEN),
        Call(group=group, caller=role, action="aws-marketplace:Subscribe", resource="*", expect="implicit-deny",
             why="the deployer's first call subscribes the account", source=MODEL_ACCESS),
    ]


def _scaling(settings: Settings, arns: Arns) -> list[Call]:
    group = "Application Auto Scaling"
    caller = "aws-managed:AWSApplicationAutoscalingSageMakerEndpointPolicy"
    endpoint = arns.of("sagemaker", f"endpoint/{settings.endpoint_name}")
    return [Call(group=group, caller=caller, action=action, resource=resource, expect="allow",
                 why="target tracking on the variant", source=SCALING_POLICY)
            for action, resource in (
                ("sagemaker:DescribeEndpoint", endpoint), ("sagemaker:UpdateEndpointWeightsAndCapacities", endpoint),
                ("cloudwatch:PutMetricAlarm", arns.of("cloudwatch", "alarm:TargetTracking-endpoint/x-AlarmHigh")))]


def _access_logs(arns: Arns) -> list[Call]:
    group, caller = "S3 server access logs", "service:logging.s3.amazonaws.com"
    s3 = f"arn:{arns.partition}:s3:::"
    target = s3 + "{AccessLogBucket}/model-bucket/2026-12-04-log"
    return [
        Call(group=group, caller=caller, action="s3:PutObject", resource=target, expect="allow",
             context={**TLS, "aws:SourceArn": s3 + "{ModelBucket}", "aws:SourceAccount": arns.account},
             why="access logs of the model bucket", source=ACCESS_LOGS),
        Call(group=group, caller=caller, action="s3:PutObject", resource=target, expect="implicit-deny",
             context={**TLS, "aws:SourceArn": s3 + "another-bucket", "aws:SourceAccount": arns.account},
             why="only the model bucket's logs", source=ACCESS_LOGS),
    ]


def _clients(settings: Settings, arns: Arns) -> list[Call]:
    endpoint = arns.of("sagemaker", f"endpoint/{settings.endpoint_name}")
    return [Call(group="Your clients (InvokePolicyArn)", caller="policy:InvokeEndpointPolicy", action=action,
                 resource=endpoint, expect="allow", why="deploy-tts say, your application", source=ASSUMPTION)
            for action in SAGEMAKER_INVOKE_ACTIONS]


def _ci(settings: Settings, arns: Arns) -> list[Call]:
    group, caller, q = "CI's read-only diff (CdkDiffPolicyArn)", "policy:CdkDiffPolicy", settings.bootstrap_qualifier
    stacks = [arns.of("cloudformation", f"stack/{name}/0a1b2c3d")
              for name in (STACK_FOUNDATION, STACK_MODEL_CACHE, STACK_ENDPOINT, STACK_AGENT)]
    reads = [Call(group=group, caller=caller, action=action, resource=stack, expect="allow",
                  why="the deployed outputs and templates", source=CDK_DIFF)
             for stack in stacks for action in ("cloudformation:DescribeStacks", "cloudformation:GetTemplate")]
    role = f"cdk-{q}-{{}}-role-{arns.account}-{arns.region}"
    return [
        *reads,
        Call(group=group, caller=caller, action="sts:AssumeRole", expect="allow", source=CDK_DIFF,
             resource=arns.of("iam", "role/" + role.format("lookup"), region=""),
             why="`cdk diff --no-change-set` reads templates with the lookup role"),
        Call(group=group, caller=caller, action="ssm:GetParameter", expect="allow", source=ASSUMPTION,
             resource=arns.of("ssm", f"parameter/cdk-bootstrap/{q}/version"), why="the bootstrap version check"),
        Call(group=group, caller=caller, action="sts:AssumeRole", expect="implicit-deny", source=CDK_DIFF,
             resource=arns.of("iam", "role/" + role.format("deploy"), region=""), why="never the deploy role"),
        Call(group=group, caller=caller, action="cloudformation:CreateChangeSet", resource=stacks[2],
             expect="implicit-deny", why="nothing that writes", source=ASSUMPTION),
        Call(group=group, caller=caller, action="cloudformation:DescribeStacks", expect="implicit-deny",
             resource=arns.of("cloudformation", "stack/SomeOtherStack/0a1b2c3d"), why="only our stacks",
             source=ASSUMPTION),
    ]
