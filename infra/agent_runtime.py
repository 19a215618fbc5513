"""The Strands voice agent on Amazon Bedrock AgentCore Runtime (L2 ``Runtime``, arm64 image)."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import Settings
from infra.shared import AGENT_IMAGE_EXCLUDES, REPO_ROOT


class AgentRuntimeStack(Stack):
    """Outputs RuntimeArn, RuntimeId and RuntimeName."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings,
                 execution_role_arn: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id,
                         description="Kokoro voice agent on Amazon Bedrock AgentCore Runtime", **kwargs)
        # Imported immutable: the L2 must not append grants to the foundation's role from here
        # (that would couple the stacks both ways); the role already holds what it needs.
        role = iam.Role.from_role_arn(self, "ExecutionRole", execution_role_arn, mutable=False)
        artifact = agentcore.AgentRuntimeArtifact.from_asset(
            str(REPO_ROOT),
            file="agent/Dockerfile",
            # AgentCore Runtime runs arm64 (Graviton) containers only.
            platform=ecr_assets.Platform.LINUX_ARM64,
            exclude=list(AGENT_IMAGE_EXCLUDES),
            display_name="Kokoro voice agent image",
        )
        region = Stack.of(self).region
        self.runtime = agentcore.Runtime(
            self, "Runtime",
            runtime_name=settings.agent_runtime_name,
            description="Voice agent: Bedrock conversation, speech from the Kokoro TTS endpoint",
            agent_runtime_artifact=artifact,
            execution_role=role,
            protocol_configuration=agentcore.ProtocolType.HTTP,
            environment_variables={
                "TTS_ENDPOINT_NAME": settings.endpoint_name,
                "BEDROCK_MODEL_ID": settings.bedrock_model_id,
                # Explicit: with no credentials or no model access the agent fails at start
                # instead of answering with the offline scripted model.
                "AGENT_MODEL": "bedrock",
                # deploy-agent calls the model once per deploy (cli/bedrock.py): no billed call
                # and no added cold start in every session's microVM.
                "BEDROCK_MODEL_CHECKED": "deploy-agent",
                # Explicit so boto3 in the container never depends on the host's defaults.
                "AWS_REGION": region,
                "AWS_DEFAULT_REGION": region,
            },
        )

        CfnOutput(self, "RuntimeArn", value=self.runtime.agent_runtime_arn,
                  description="AgentCore runtime ARN (invoke_agent_runtime target)")
        CfnOutput(self, "RuntimeId", value=self.runtime.agent_runtime_id,
                  description="AgentCore runtime id")
        CfnOutput(self, "RuntimeName", value=self.runtime.agent_runtime_name,
                  description="AgentCore runtime name")
