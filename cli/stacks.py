"""Stack names (from infra/defaults.py, shared with the app) and the CfnOutput keys the CLIs read."""

from __future__ import annotations

from infra.defaults import STACK_AGENT as AGENT_STACK
from infra.defaults import STACK_ENDPOINT as ENDPOINT_STACK
from infra.defaults import STACK_FOUNDATION as FOUNDATION_STACK
from infra.defaults import STACK_MODEL_CACHE as MODEL_CACHE_STACK

__all__ = [
    "AGENT_STACK", "ENDPOINT_STACK", "FOUNDATION_STACK", "MODEL_CACHE_STACK", "TTS_STACKS", "ALL_STACKS",
    "FOUNDATION_OUTPUTS", "MODEL_CACHE_OUTPUTS", "ENDPOINT_OUTPUTS", "AGENT_OUTPUTS",
]

TTS_STACKS = (FOUNDATION_STACK, MODEL_CACHE_STACK, ENDPOINT_STACK)  # deploy order
ALL_STACKS = (*TTS_STACKS, AGENT_STACK)

FOUNDATION_OUTPUTS = ("SageMakerRoleArn", "AgentRuntimeRoleArn", "InvokePolicyArn", "BedrockModelId",
                      "AgentRuntimeName", "CdkDiffPolicyArn")
MODEL_CACHE_OUTPUTS = ("BucketName", "ModelPrefix", "LogBucketName")
ENDPOINT_OUTPUTS = ("EndpointName", "ModelName", "AlarmTopicArn", "DeployContext")
AGENT_OUTPUTS = ("RuntimeArn", "RuntimeId", "RuntimeName")
