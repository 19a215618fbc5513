"""Stand-in for the CDK CLI (tests put it on PATH as `npx`): logs its arguments and "deploys"
each stack by creating in moto what the real stack would create, with the contract's outputs."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import clitest_support as support


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--yes" and not a.startswith("aws-cdk@")]
    with open(os.environ["FAKE_CDK_LOG"], "a") as log:
        log.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "region": os.environ.get("AWS_REGION")}) + "\n")
    if args[:1] == ["--version"]:
        print("2.1148.0 (build fake)")
        return 0
    if args[:1] == ["diff"]:
        print("Stack " + " ".join(a for a in args[1:] if a.startswith("Kokoro")))
        return int(os.environ.get("FAKE_CDK_DIFF_EXIT", "0"))
    if args[:1] != ["deploy"]:
        return 2
    stack = args[1]
    context = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-c")
    if os.environ.get("FAKE_CDK_FAIL") == stack:
        print(f"{stack} failed: something broke", file=sys.stderr)
        return 1
    # `cdk deploy STACK` deploys the stacks it depends on too, with the same context.
    for dependency in DEPENDENCIES.get(stack, ()):
        deploy(dependency, context)
    return deploy(stack, context)


DEPENDENCIES = {
    "KokoroTtsModelCache": ("KokoroTtsFoundation",),
    "KokoroTtsEndpoint": ("KokoroTtsFoundation", "KokoroTtsModelCache"),
    "KokoroAgentRuntime": ("KokoroTtsFoundation",),
}


def deploy(stack: str, context: dict[str, str]) -> int:
    exists = stack in support.stack_names()
    if stack == "KokoroTtsFoundation":
        # Always redeployed: the agent role's Bedrock grant follows the context (the app's default when unset).
        if os.environ.get("FAKE_CDK_REAL_FOUNDATION") == "1":
            deploy_real_foundation(context)
        else:
            support.deploy_foundation(bedrock_model_id=context.get("bedrockModelId", support.DEFAULT_MODEL))
    elif exists and stack != "KokoroTtsEndpoint":
        return 0
    elif stack == "KokoroTtsModelCache":
        support.deploy_model_cache(context["modelRevision"])
    elif stack == "KokoroTtsEndpoint":
        return deploy_endpoint(context)
    elif stack == "KokoroAgentRuntime":
        support.deploy_agent_runtime()
    return 0


def deploy_real_foundation(context: dict[str, str]) -> None:
    """The real FoundationStack's template, synthesized from ``context`` and created in moto's
    CloudFormation, which creates its IAM roles and inline policies (slow: only on a change; moto
    ignores a role's Policies on update, so a changed stack is deleted and created anew)."""
    model = context.get("bedrockModelId", support.DEFAULT_MODEL)
    if "KokoroTtsFoundation" in support.stack_names() and support.foundation_model() == model:
        return
    os.environ["PATH"] = os.environ["FAKE_CDK_REAL_PATH"]  # jsii runs the real node, not the stand-in
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from infra.config import DEFAULTS, Settings
    from infra.foundation import FoundationStack

    chosen: dict[str, str] = {key: context[key] for key in ("bedrockModelId", "endpointName") if key in context}
    merged: dict[str, Any] = {**DEFAULTS, **chosen}
    settings = Settings.from_context(merged.get)
    template = Template.from_stack(FoundationStack(App(), "KokoroTtsFoundation", settings=settings)).to_json()
    if "KokoroTtsFoundation" in support.stack_names():
        support.session().client("cloudformation").delete_stack(StackName="KokoroTtsFoundation")
    support.put_template("KokoroTtsFoundation", template)


def deploy_endpoint(context: dict[str, str]) -> int:
    """Create the endpoint with autoscaling, or change its instance type under AWS's documented rule.

    SageMaker (endpoint-scaling-update): changing the instance type of a variant that is a target
    for auto scaling fails. This stand-in enforces that rule; it is our reading of the docs, not AWS.
    """
    name, instance_type = context["endpointName"], context["instanceType"]
    current = support.endpoint_instance_type(name)
    if current not in (None, instance_type) and support.scaling_state(name)[0]:
        print(f"UpdateEndpoint failed: the instance type of {name} cannot change while its variant "
              "is a target for auto scaling; stack rolled back", file=sys.stderr)
        return 1
    support.deploy_endpoint(name, instance_type, autoscaling=context.get("autoscaling", "true") != "false",
                            deploy_context=real_deploy_context(context))
    return 0


def real_deploy_context(context: dict[str, str]) -> str:
    """The DeployContext output the real endpoint stack writes for ``context`` (same code path:
    infra/config.py's Settings, which the stack's CfnOutput serializes the same way)."""
    from infra.config import DEFAULTS, Settings

    settings = Settings.from_context({**DEFAULTS, **context}.get)
    return json.dumps(settings.deploy_context(), sort_keys=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
