"""Foundation stack: role shapes, and how ARNs follow the endpoint name and Bedrock model id."""

from __future__ import annotations

from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Match, Template
from infra_support import Synthesized, grants, render

from infra.config import DEFAULTS, Settings
from infra.foundation import FoundationStack


def _foundation(**overrides: Any) -> dict[str, Any]:
    """A standalone foundation stack (no nag, no assets): cheap to synthesize per variant."""
    settings = Settings.from_context({**DEFAULTS, **overrides}.get)
    stack = FoundationStack(App(), "KokoroTtsFoundation", settings=settings)
    return dict(Template.from_stack(stack).to_json())


def _agent_grants(template: dict[str, Any]) -> dict[str, set[str]]:
    (role,) = [r for k, r in template["Resources"].items() if k.startswith("AgentRuntimeRole")]
    return grants(role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"])


def test_roles_trust_their_services(default_synth: Synthesized) -> None:
    template = Template.from_json(default_synth.templates["KokoroTtsFoundation"])
    template.resource_count_is("AWS::IAM::Role", 2)
    template.resource_count_is("AWS::IAM::ManagedPolicy", 2)  # the invoke policy and CI's diff policy
    for service in ("sagemaker.amazonaws.com", "bedrock-agentcore.amazonaws.com"):
        template.has_resource_properties("AWS::IAM::Role", {
            "AssumeRolePolicyDocument": {"Statement": [Match.object_like({
                "Action": "sts:AssumeRole", "Principal": {"Service": service}})]},
        })


def test_roles_have_no_managed_policies(default_synth: Synthesized) -> None:
    for resource in default_synth.templates["KokoroTtsFoundation"]["Resources"].values():
        if resource["Type"] == "AWS::IAM::Role":
            assert "ManagedPolicyArns" not in resource["Properties"]


def test_endpoint_arn_is_lowercased_like_sagemaker_does() -> None:
    granted = _agent_grants(_foundation(endpointName="Kokoro-TTS-Prod"))
    assert granted["sagemaker:InvokeEndpointWithBidirectionalStream"] == {
        "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}:endpoint/kokoro-tts-prod"}


def test_base_model_id_grants_the_regional_model_only() -> None:
    granted = _agent_grants(_foundation(bedrockModelId="amazon.nova-lite-v1:0"))
    assert granted["bedrock:InvokeModelWithResponseStream"] == {
        "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.nova-lite-v1:0"}
    assert "bedrock:InvokeModel" not in granted


def test_global_profile_adds_the_regionless_model_arn() -> None:
    template = _foundation(bedrockModelId="global.anthropic.claude-haiku-4-5-20251001-v1:0")
    resources = _agent_grants(template)["bedrock:InvokeModelWithResponseStream"]
    assert resources == {
        "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/"
        "global.anthropic.claude-haiku-4-5-20251001-v1:0",
        "arn:${AWS::Partition}:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
        "arn:${AWS::Partition}:bedrock:::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
    }


def test_outputs_reference_the_roles_and_policy(default_synth: Synthesized) -> None:
    outputs = render(default_synth.templates["KokoroTtsFoundation"]["Outputs"])
    assert outputs["SageMakerRoleArn"]["Value"].startswith("${SageMakerExecutionRole")
    assert outputs["AgentRuntimeRoleArn"]["Value"].startswith("${AgentRuntimeRole")
    assert outputs["InvokePolicyArn"]["Value"].startswith("${InvokeEndpointPolicy")


def test_bedrock_model_output_names_the_model_the_role_may_invoke() -> None:
    # deploy-tts reads this output back and passes it on, so a TTS redeploy keeps the grant.
    template = _foundation(bedrockModelId="amazon.nova-lite-v1:0")
    assert template["Outputs"]["BedrockModelId"]["Value"] == "amazon.nova-lite-v1:0"
    assert _agent_grants(template)["bedrock:InvokeModelWithResponseStream"] == {
        "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/amazon.nova-lite-v1:0"}
