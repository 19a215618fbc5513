"""Stack names and CfnOutput keys: the contract between these CLIs and infra/."""

from __future__ import annotations

FOUNDATION_STACK = "KokoroTtsFoundation"
MODEL_CACHE_STACK = "KokoroTtsModelCache"
ENDPOINT_STACK = "KokoroTtsEndpoint"
AGENT_STACK = "KokoroAgentRuntime"

TTS_STACKS = (FOUNDATION_STACK, MODEL_CACHE_STACK, ENDPOINT_STACK)  # deploy order
ALL_STACKS = (*TTS_STACKS, AGENT_STACK)

FOUNDATION_OUTPUTS = ("SageMakerRoleArn", "AgentRuntimeRoleArn", "InvokePolicyArn")
MODEL_CACHE_OUTPUTS = ("BucketName", "ModelPrefix", "LogBucketName")
ENDPOINT_OUTPUTS = ("EndpointName", "ModelName")
AGENT_OUTPUTS = ("RuntimeArn", "RuntimeId", "RuntimeName")
