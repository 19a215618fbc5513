"""IAM for the whole system: the SageMaker execution role, the AgentCore runtime role and a
managed policy that lets a person or role call the endpoint.

Roles live in their own stack so a rebuilt endpoint or runtime never replaces them, and every
ARN they need (endpoint, model, log groups) is derived from names known before deployment: no
other stack's outputs are imported here, so there is no cross-stack cycle. The model-cache read
grant is the one exception: it is attached by the model-cache stack, next to the bucket.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import Settings
from infra.defaults import STACK_AGENT, STACK_ENDPOINT, STACK_FOUNDATION, STACK_MODEL_CACHE
from infra.shared import (
    ecr_pull_statements,
    invoke_endpoint_statement,
    log_group_arn,
    log_writer_statements,
    put_metric_data_statement,
)

SAGEMAKER_METRIC_NAMESPACES = ("AWS/SageMaker", "/aws/sagemaker/Endpoints")
AGENTCORE_METRIC_NAMESPACE = "bedrock-agentcore"


class FoundationStack(Stack):
    """Roles and two managed policies; outputs SageMakerRoleArn, AgentRuntimeRoleArn, InvokePolicyArn,
    CdkDiffPolicyArn, BedrockModelId, AgentRuntimeName."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        super().__init__(scope, construct_id,
                         description="Kokoro TTS: IAM roles and the endpoint invoke policy", **kwargs)
        self.settings = settings
        self.sagemaker_role = self._sagemaker_role()
        self.agent_role = self._agent_role()
        self.invoke_policy = iam.ManagedPolicy(
            self, "InvokeEndpointPolicy",
            description=f"Invoke the {settings.endpoint_name} TTS endpoint (all three streaming modes)",
            statements=[invoke_endpoint_statement(self, settings.endpoint_name)],
        )
        self.diff_policy = self._cdk_diff_policy()

        CfnOutput(self, "SageMakerRoleArn", value=self.sagemaker_role.role_arn,
                  description="Execution role of the SageMaker model")
        CfnOutput(self, "AgentRuntimeRoleArn", value=self.agent_role.role_arn,
                  description="Execution role of the AgentCore runtime")
        # The model the agent role may invoke: deploy-tts reads it back so a TTS redeploy keeps
        # the grant deploy-agent made (both CLIs pass it on to every `cdk deploy`).
        CfnOutput(self, "BedrockModelId", value=settings.bedrock_model_id,
                  description="Bedrock model id or inference profile the agent role may invoke")
        # teardown --all reads it to find the runtime's log groups whatever runtime name was deployed.
        CfnOutput(self, "AgentRuntimeName", value=settings.agent_runtime_name,
                  description="AgentCore runtime name the agent role is scoped to")
        CfnOutput(self, "InvokePolicyArn", value=self.invoke_policy.managed_policy_arn,
                  description="Attach to a user or role that calls the TTS endpoint")
        CfnOutput(self, "CdkDiffPolicyArn", value=self.diff_policy.managed_policy_arn,
                  description="Attach to CI's role: read-only `deploy-tts diff --deployed` / `deploy-agent diff`")

    def _cdk_diff_policy(self) -> iam.ManagedPolicy:
        """What CI's read-only diff needs and nothing that writes: the stacks' outputs and templates
        (the CLIs read DeployContext, EndpointName, BedrockModelId), and the CDK bootstrap's lookup
        role, which `cdk diff --no-change-set` assumes to read the deployed templates (with a change
        set it would assume the deploy role instead: CDK CLI, `diff --change-set` help)."""
        stack = Stack.of(self)
        qualifier = self.settings.bootstrap_qualifier
        stacks = [stack.format_arn(service="cloudformation", resource="stack", resource_name=f"{name}/*")
                  for name in (STACK_FOUNDATION, STACK_MODEL_CACHE, STACK_ENDPOINT, STACK_AGENT)]
        return iam.ManagedPolicy(
            self, "CdkDiffPolicy",
            description="Read-only: the Kokoro stacks' outputs and templates, and the CDK lookup role",
            statements=[
                iam.PolicyStatement(sid="ReadKokoroStacks", resources=stacks,
                                    actions=["cloudformation:DescribeStacks", "cloudformation:GetTemplate"]),
                iam.PolicyStatement(
                    sid="AssumeCdkLookupRole", actions=["sts:AssumeRole"],
                    resources=[stack.format_arn(service="iam", region="", account=stack.account, resource="role",
                                                resource_name=f"cdk-{qualifier}-lookup-role-{stack.account}-"
                                                              f"{stack.region}")]),
                iam.PolicyStatement(
                    # The CLI checks the bootstrap version itself when it cannot assume the lookup role.
                    sid="ReadBootstrapVersion", actions=["ssm:GetParameter"],
                    resources=[stack.format_arn(service="ssm", resource="parameter",
                                                resource_name=f"cdk-bootstrap/{qualifier}/version")]),
            ],
        )

    def _sagemaker_role(self) -> iam.Role:
        """Pull the image, write the endpoint's logs and metrics; S3 read is added by the cache stack."""
        log_group = log_group_arn(self, f"/aws/sagemaker/Endpoints/{self.settings.endpoint_name}")
        document = iam.PolicyDocument(statements=[
            *ecr_pull_statements(self, self.settings.bootstrap_qualifier),
            *log_writer_statements(log_group, group_sid="EndpointLogGroup", stream_sid="EndpointLogStreams"),
            put_metric_data_statement(*SAGEMAKER_METRIC_NAMESPACES),
        ])
        return iam.Role(
            self, "SageMakerExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="Kokoro TTS SageMaker model: image pull, endpoint logs and metrics",
            inline_policies={"KokoroEndpointRuntime": document},
        )

    def _agent_role(self) -> iam.Role:
        """Invoke the one TTS endpoint and the one Bedrock model, plus what AgentCore itself needs."""
        stack = Stack.of(self)
        runtime_logs = log_group_arn(
            self, f"/aws/bedrock-agentcore/runtimes/{self.settings.agent_runtime_name}-*")
        statements = [
            invoke_endpoint_statement(self, self.settings.endpoint_name),
            *self._bedrock_statements(),
            *ecr_pull_statements(self, self.settings.bootstrap_qualifier),
            *log_writer_statements(runtime_logs, group_sid="RuntimeLogGroups", stream_sid="RuntimeLogStreams"),
            iam.PolicyStatement(
                sid="DescribeLogGroups",
                actions=["logs:DescribeLogGroups"],
                # DescribeLogGroups is a list call: it is authorized on the account's
                # "log-group:*" pattern, never on one group.
                resources=[log_group_arn(self, "*")],
            ),
            iam.PolicyStatement(
                sid="XRayTraces",
                actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords",
                         "xray:GetSamplingRules", "xray:GetSamplingTargets"],
                # Resource "*" is required: these X-Ray actions support no resource-level
                # permissions. They only let the runtime's OpenTelemetry exporter send traces.
                resources=["*"],
            ),
            put_metric_data_statement(AGENTCORE_METRIC_NAMESPACE),
            iam.PolicyStatement(
                sid="WorkloadAccessToken",
                # The token of an invocation signed with SigV4 and no user id, the only way this
                # runtime is called (no JWT authorizer, no X-Amzn-Bedrock-AgentCore-Runtime-User-Id
                # header): ...ForJWT and ...ForUserId serve paths it never takes, and AWS advises
                # denying ForUserId where it is not needed (AgentCore guide, runtime permissions).
                actions=["bedrock-agentcore:GetWorkloadAccessToken"],
                resources=[
                    stack.format_arn(service="bedrock-agentcore", resource="workload-identity-directory",
                                     resource_name="default"),
                    stack.format_arn(service="bedrock-agentcore", resource="workload-identity-directory",
                                     resource_name="default/workload-identity/"
                                                   f"{self.settings.agent_runtime_name}-*"),
                ],
            ),
        ]
        runtime_arns = stack.format_arn(service="bedrock-agentcore", resource="runtime",
                                        resource_name=f"{self.settings.agent_runtime_name}*")
        return iam.Role(
            self, "AgentRuntimeRole",
            # Confused-deputy guard: only this account's runtime of this name may assume it.
            assumed_by=iam.ServicePrincipal("bedrock-agentcore.amazonaws.com").with_conditions({
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": runtime_arns},
            }),
            description="Kokoro voice agent on AgentCore: TTS endpoint, one Bedrock model, logs, traces",
            inline_policies={"KokoroVoiceAgent": iam.PolicyDocument(statements=statements)},
        )

    def _bedrock_statements(self) -> list[iam.PolicyStatement]:
        """Streaming invoke of the configured model only. No AWS Marketplace action: the
        deployer's first call subscribes the account (cli/bedrock.py, check_first_call), after
        which Bedrock answers any caller allowed to invoke the model (Bedrock user guide,
        "Access Amazon Bedrock foundation models").

        For a cross-Region inference profile the caller needs the profile ARN and the foundation
        model in every Region the profile routes to; the condition keeps that second grant usable
        only through this profile.
        """
        stack = Stack.of(self)
        actions = ["bedrock:InvokeModelWithResponseStream"]
        model = self.settings.bedrock_foundation_model
        geo = self.settings.bedrock_geo
        if geo is None:
            return [iam.PolicyStatement(
                sid="InvokeBedrockModel", actions=actions,
                resources=[stack.format_arn(service="bedrock", account="",
                                            resource="foundation-model", resource_name=model)],
            )]
        profile_arn = stack.format_arn(service="bedrock", resource="inference-profile",
                                       resource_name=self.settings.bedrock_model_id)
        model_arns = [stack.format_arn(service="bedrock", region="*", account="",
                                       resource="foundation-model", resource_name=model)]
        if geo == "global":
            # Global profiles route to foundation-model ARNs without a Region.
            model_arns.append(stack.format_arn(service="bedrock", region="", account="",
                                               resource="foundation-model", resource_name=model))
        return [
            iam.PolicyStatement(sid="InvokeInferenceProfile", actions=actions, resources=[profile_arn]),
            iam.PolicyStatement(
                sid="InvokeProfileModel", actions=actions, resources=model_arns,
                conditions={"StringLike": {"bedrock:InferenceProfileArn": profile_arn}},
            ),
        ]
