"""Stand-in for the CDK CLI (tests put it on PATH as `npx`): logs its arguments and "deploys"
each stack by creating in moto what the real stack would create, with the contract's outputs."""

from __future__ import annotations

import json
import os
import sys

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
    if stack in support.stack_names():
        return 0
    if stack == "KokoroTtsFoundation":
        support.deploy_foundation()
    elif stack == "KokoroTtsModelCache":
        support.deploy_model_cache(context["modelRevision"])
    elif stack == "KokoroTtsEndpoint":
        support.deploy_endpoint(context["endpointName"], context["instanceType"])
    elif stack == "KokoroAgentRuntime":
        support.deploy_agent_runtime()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
