"""Agent runtime stack: the AgentCore L2 runtime, its arm64 image, role and environment."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Template
from infra_support import Synthesized, render


def _runtime(synth: Synthesized) -> dict[str, Any]:
    resources = synth.templates["KokoroAgentRuntime"]["Resources"]
    (runtime,) = [r for r in resources.values() if r["Type"] == "AWS::BedrockAgentCore::Runtime"]
    return dict(runtime["Properties"])


def test_runtime_name_role_and_protocol(default_synth: Synthesized) -> None:
    props = render(_runtime(default_synth))
    assert props["AgentRuntimeName"] == "kokoro_voice_agent"
    assert props["ProtocolConfiguration"] == "HTTP"
    assert props["NetworkConfiguration"] == {"NetworkMode": "PUBLIC"}
    assert props["RoleArn"].startswith("${Import:KokoroTtsFoundation:ExportsOutputFnGetAttAgentRuntimeRole")


def test_runtime_environment(default_synth: Synthesized) -> None:
    assert render(_runtime(default_synth)["EnvironmentVariables"]) == {
        "TTS_ENDPOINT_NAME": "kokoro-tts",
        "BEDROCK_MODEL_ID": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "AGENT_MODEL": "bedrock",  # never the offline scripted model in AWS
        "BEDROCK_MODEL_CHECKED": "deploy-agent",  # one model call per deploy, none per session
        "AWS_REGION": "${AWS::Region}",
        "AWS_DEFAULT_REGION": "${AWS::Region}",
    }


def test_no_iam_is_created_in_the_agent_stack(default_synth: Synthesized) -> None:
    template = Template.from_json(default_synth.templates["KokoroAgentRuntime"])
    for kind in ("AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        template.resource_count_is(kind, 0)


def test_image_is_arm64_from_the_agent_dockerfile(default_synth: Synthesized) -> None:
    (image,) = default_synth.assets["KokoroAgentRuntime"]["dockerImages"].values()
    assert image["source"]["platform"] == "linux/arm64"
    assert image["source"]["dockerFile"] == "agent/Dockerfile"
    tag = next(iter(image["destinations"].values()))["imageTag"]
    uri = _runtime(default_synth)["AgentRuntimeArtifact"]["ContainerConfiguration"]["ContainerUri"]["Fn::Sub"]
    assert uri.endswith(f"cdk-hnb659fds-container-assets-${{AWS::AccountId}}-${{AWS::Region}}:{tag}")
    staged = default_synth.outdir / image["source"]["directory"]
    assert (staged / "agent/Dockerfile").is_file()
    for excluded in (".venv", ".git", "containers", "infra", "tests"):
        assert not (staged / excluded).exists(), excluded


def test_outputs(default_synth: Synthesized) -> None:
    outputs = render(default_synth.templates["KokoroAgentRuntime"]["Outputs"])
    assert outputs["RuntimeArn"]["Value"].endswith(".AgentRuntimeArn}")
    assert outputs["RuntimeId"]["Value"].endswith(".AgentRuntimeId}")
    assert outputs["RuntimeName"]["Value"] == "kokoro_voice_agent"
