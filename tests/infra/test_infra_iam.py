"""Least privilege: no wildcard actions anywhere, '*' resources only where AWS requires them,
and each role's exact grants."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import MODEL_PREFIX, Synthesized, grants, render, role_statements

from infra.iam_audit import STAR_RESOURCE_ALLOWED, audit_template, iter_policy_documents

P, R, A = "${AWS::Partition}", "${AWS::Region}", "${AWS::AccountId}"
ENDPOINT_ARN = f"arn:{P}:sagemaker:{R}:{A}:endpoint/kokoro-tts"
ASSET_REPO = f"arn:{P}:ecr:{R}:{A}:repository/cdk-hnb659fds-container-assets-{A}-{R}"
MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
PROFILE_ARN = f"arn:{P}:bedrock:{R}:{A}:inference-profile/us.{MODEL}"
INVOKE = {"sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream",
          "sagemaker:InvokeEndpointWithBidirectionalStream"}


def test_every_policy_in_every_template_passes_the_audit(default_synth: Synthesized,
                                                          override_synth: Synthesized) -> None:
    documents = 0
    for synth in (default_synth, override_synth):
        for name, template in synth.templates.items():
            assert audit_template(template) == [], name
            documents += len(list(iter_policy_documents(template)))
    assert documents >= 8  # two roles' inline policies, the managed policy, the S3 read policy


def _template(resource_type: str, statement: dict[str, Any]) -> dict[str, Any]:
    document = {"Version": "2012-10-17", "Statement": [statement]}
    if resource_type == "AWS::IAM::Role":
        props: dict[str, Any] = {"Policies": [{"PolicyName": "inline", "PolicyDocument": document}]}
    else:
        props = {"PolicyDocument": document}
    return {"Resources": {"Injected": {"Type": resource_type, "Properties": props}}}


STATEMENT_CASES: list[tuple[dict[str, Any], str]] = [
    ({"Effect": "Allow", "Action": "*", "Resource": "arn:aws:s3:::b"}, "wildcard or non-literal action '*'"),
    ({"Effect": "Allow", "Action": ["s3:*"], "Resource": "arn:aws:s3:::b"}, "'s3:*'"),
    ({"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::b"}, "'s3:Get*'"),
    ({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}, "not in the allow-list"),
    ({"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"}, "cloudwatch:namespace"),
    ({"Effect": "Allow", "NotAction": "iam:*", "Resource": "arn:aws:s3:::b"}, "NotAction"),
]


@pytest.mark.parametrize("resource_type", ["AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"])
@pytest.mark.parametrize(("statement", "expected"), STATEMENT_CASES)
def test_walker_catches_injected_wildcards(resource_type: str, statement: dict[str, Any], expected: str) -> None:
    findings = audit_template(_template(resource_type, statement))
    assert findings, statement
    assert any(expected in str(finding) for finding in findings), findings
    assert all(str(f).startswith("Injected") for f in findings)


def test_walker_accepts_allow_listed_and_deny_statements() -> None:
    ok: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
         "Condition": {"StringEquals": {"cloudwatch:namespace": "x"}}},
        {"Effect": "Deny", "Action": "*", "Resource": "*"},
    ]
    for statement in ok:
        assert audit_template(_template("AWS::IAM::Policy", statement)) == []
    assert set(STAR_RESOURCE_ALLOWED) >= {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData"}


def test_agent_role_exact_grants(default_synth: Synthesized) -> None:
    statements = role_statements(default_synth.templates, "KokoroTtsFoundation", "AgentRuntimeRole")
    granted = grants(statements)
    sagemaker = {a: r for a, r in granted.items() if a.startswith("sagemaker:")}
    assert sagemaker == {action: {ENDPOINT_ARN} for action in INVOKE}
    bedrock = {a: r for a, r in granted.items() if a.startswith("bedrock:")}
    assert bedrock == {"bedrock:InvokeModelWithResponseStream": {
        PROFILE_ARN, f"arn:{P}:bedrock:*::foundation-model/{MODEL}"}}
    runtime_logs = f"arn:{P}:logs:{R}:{A}:log-group:/aws/bedrock-agentcore/runtimes/kokoro_voice_agent-*"
    identity = f"arn:{P}:bedrock-agentcore:{R}:{A}:workload-identity-directory/default"
    assert {a: r for a, r in granted.items() if not a.startswith(("sagemaker:", "bedrock:"))} == {
        "ecr:BatchCheckLayerAvailability": {ASSET_REPO},
        "ecr:BatchGetImage": {ASSET_REPO},
        "ecr:GetDownloadUrlForLayer": {ASSET_REPO},
        "ecr:GetAuthorizationToken": {"*"},
        "logs:CreateLogGroup": {runtime_logs},
        "logs:DescribeLogStreams": {runtime_logs},
        "logs:CreateLogStream": {f"{runtime_logs}:log-stream:*"},
        "logs:PutLogEvents": {f"{runtime_logs}:log-stream:*"},
        "logs:DescribeLogGroups": {f"arn:{P}:logs:{R}:{A}:log-group:*"},
        "xray:PutTraceSegments": {"*"},
        "xray:PutTelemetryRecords": {"*"},
        "xray:GetSamplingRules": {"*"},
        "xray:GetSamplingTargets": {"*"},
        # No aws-marketplace action (the deployer's first call subscribes), no token for a JWT or
        # a user id (no authorizer, no caller sends one).
        "cloudwatch:PutMetricData": {"*"},
        "bedrock-agentcore:GetWorkloadAccessToken": {identity, f"{identity}/workload-identity/kokoro_voice_agent-*"},
    }
    profile_model = [s for s in statements if s.get("Sid") == "InvokeProfileModel"]
    assert profile_model[0]["Condition"]["StringLike"]["bedrock:InferenceProfileArn"]
    metrics = [s for s in statements if s.get("Sid") == "PutMetricDataOwnNamespace"]
    assert metrics[0]["Condition"] == {"StringEquals": {"cloudwatch:namespace": ["bedrock-agentcore"]}}


def test_agent_role_trust_is_scoped_to_this_runtime(default_synth: Synthesized) -> None:
    resources = default_synth.templates["KokoroTtsFoundation"]["Resources"]
    (role,) = [r for k, r in resources.items() if k.startswith("AgentRuntimeRole")]
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "bedrock-agentcore.amazonaws.com"}
    assert render(statement["Condition"]) == {
        "StringEquals": {"aws:SourceAccount": A},
        "ArnLike": {"aws:SourceArn": f"arn:{P}:bedrock-agentcore:{R}:{A}:runtime/kokoro_voice_agent*"},
    }


def test_sagemaker_role_exact_grants(default_synth: Synthesized) -> None:
    granted = grants(role_statements(default_synth.templates, "KokoroTtsFoundation", "SageMakerExecutionRole"))
    log_group = f"arn:{P}:logs:{R}:{A}:log-group:/aws/sagemaker/Endpoints/kokoro-tts"
    prefix = MODEL_PREFIX
    assert granted == {
        "ecr:BatchCheckLayerAvailability": {ASSET_REPO},
        "ecr:BatchGetImage": {ASSET_REPO},
        "ecr:GetDownloadUrlForLayer": {ASSET_REPO},
        "ecr:GetAuthorizationToken": {"*"},
        "logs:CreateLogGroup": {log_group},
        "logs:DescribeLogStreams": {log_group},
        "logs:CreateLogStream": {f"{log_group}:log-stream:*"},
        "logs:PutLogEvents": {f"{log_group}:log-stream:*"},
        "cloudwatch:PutMetricData": {"*"},
        "s3:GetObject": {f"${{ModelBucketB33D855B.Arn}}/{prefix}*"},
        "s3:ListBucket": {"${ModelBucketB33D855B.Arn}"},
        # The rollback alarms only (SageMaker reads them with this role during an update).
        "cloudwatch:DescribeAlarms": {"${ObservabilitySlowFirstAudioAlarm07245FDF.Arn}",
                                      "${ObservabilityInvocation5xxAlarm0BB55F59.Arn}"},
    }


def test_invoke_managed_policy_is_the_three_actions_on_the_endpoint(default_synth: Synthesized) -> None:
    resources = default_synth.templates["KokoroTtsFoundation"]["Resources"]
    (policy,) = [r for key, r in resources.items() if key.startswith("InvokeEndpointPolicy")]
    assert grants(policy["Properties"]["PolicyDocument"]["Statement"]) == {a: {ENDPOINT_ARN} for a in INVOKE}


def test_ci_diff_policy_reads_and_never_writes(default_synth: Synthesized) -> None:
    resources = default_synth.templates["KokoroTtsFoundation"]["Resources"]
    (policy,) = [r for key, r in resources.items() if key.startswith("CdkDiffPolicy")]
    stacks = {f"arn:{P}:cloudformation:{R}:{A}:stack/{name}/*" for name in
              ("KokoroTtsFoundation", "KokoroTtsModelCache", "KokoroTtsEndpoint", "KokoroAgentRuntime")}
    assert grants(policy["Properties"]["PolicyDocument"]["Statement"]) == {
        "cloudformation:DescribeStacks": stacks,
        "cloudformation:GetTemplate": stacks,
        "sts:AssumeRole": {f"arn:{P}:iam::{A}:role/cdk-hnb659fds-lookup-role-{A}-{R}"},
        "ssm:GetParameter": {f"arn:{P}:ssm:{R}:{A}:parameter/cdk-bootstrap/hnb659fds/version"},
    }

