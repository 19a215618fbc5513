"""`deploy-agent`: deploy, diff, inspect and tear down the Strands voice agent on AgentCore Runtime."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from cli.aws import (
    AwsTarget,
    CliError,
    cli_errors,
    get_stack,
    require_outputs,
    stack_outputs,
)
from cli.aws_checks import check_agentcore_region, check_bedrock_model_id, check_bidi_streaming_region
from cli.bedrock import check_first_call, check_model_access, resolve_bedrock_model_id
from cli.cdk import ToolCheck, cdk_deploy, cdk_diff, context_args
from cli.commands import command_app, confirm_or_abort, connect, teardown_stacks
from cli.options import (
    DEFAULT_RUNTIME_NAME,
    BedrockModelId,
    DeleteImages,
    FailOnDiff,
    JsonOutput,
    Profile,
    Region,
    WaitTimeout,
    Yes,
    target_flags,
)
from cli.preflight import run_preflight
from cli.progress import Steps, confirm, err_console, out_console, poll_until
from cli.stacks import AGENT_STACK, ALL_STACKS, ENDPOINT_STACK, FOUNDATION_STACK
from cli.status import NOT_FOUND, UNAVAILABLE, endpoint_report, render_report, runtime_report, stack_report
from cli.teardown import runtime_log_groups

app = command_app(name="deploy-agent",
                  help="Deploy and manage the Kokoro voice agent on Amazon Bedrock AgentCore Runtime.")

HEALTHY = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"}
RUNTIME_DONE = {"READY"}
RUNTIME_FAILED = {"CREATE_FAILED", "UPDATE_FAILED", "DELETING", NOT_FOUND}
STATUS_STACKS = (FOUNDATION_STACK, ENDPOINT_STACK, AGENT_STACK)


def tts_prerequisites(*, target: AwsTarget) -> tuple[ToolCheck, str | None]:
    """The agent needs the foundation (its role) and the TTS endpoint; returns the endpoint name."""
    hint = "Deploy the TTS side first: `deploy-tts deploy` (same --region/--profile)."
    cfn = target.client("cloudformation")
    for name in (FOUNDATION_STACK, ENDPOINT_STACK):
        stack = get_stack(cfn, name)
        if stack is None:
            return ToolCheck("TTS stacks", False, f"{name} is not deployed", hint), None
        if stack["StackStatus"] not in HEALTHY:
            return ToolCheck("TTS stacks", False, f"{name} is {stack['StackStatus']}", hint), None
    outputs = stack_outputs(get_stack(cfn, ENDPOINT_STACK))
    endpoint = outputs.get("EndpointName")
    if not endpoint:
        return ToolCheck("TTS stacks", False, f"{ENDPOINT_STACK} has no EndpointName output", hint), None
    report = endpoint_report(target=target, name=endpoint)
    if report["status"] != "InService":
        return (
            ToolCheck(
                "TTS endpoint",
                False,
                f"endpoint {endpoint} is {report['status']}",
                "Wait until `deploy-tts status` shows InService, or redeploy with `deploy-tts deploy`.",
            ),
            None,
        )
    return ToolCheck("TTS endpoint", True, f"{endpoint} InService"), endpoint


def region_checks(*, target: AwsTarget, model: str) -> list[ToolCheck]:
    """The Region must offer AgentCore Runtime, the model id, and (probed) bidirectional streaming.
    The probe is skipped under AWS_ENDPOINT_URL: a stand-in, not the Region, answers then."""
    checks = [check_agentcore_region(target=target), check_bedrock_model_id(target=target, model=model)]
    if not os.environ.get("AWS_ENDPOINT_URL"):
        checks.append(check_bidi_streaming_region(target=target))
    return checks


def wait_for_runtime(
    *, target: AwsTarget, outputs: dict[str, str], timeout_s: float, interval_s: float = 10
) -> dict[str, Any]:
    """Poll the runtime until READY; when the AgentCore API is not reachable, say so and stop."""
    result = poll_until(
        fetch=lambda: runtime_report(target=target, outputs=outputs),
        is_done=lambda r: r["status"] in RUNTIME_DONE | RUNTIME_FAILED | {UNAVAILABLE},
        describe=lambda r: f"Agent runtime [bold]{outputs.get('RuntimeName')}[/]: {r['status']}",
        timeout_s=timeout_s,
        interval_s=interval_s,
    )
    report = result.value
    if report["status"] == UNAVAILABLE:
        err_console().print(
            f"[yellow]Runtime status not available:[/] {report.get('detail')}. "
            "CloudFormation reported the stack complete; not waiting further."
        )
    elif report["status"] in RUNTIME_FAILED:
        raise CliError(
            f"Agent runtime is {report['status']}: "
            f"{report.get('failure_reason') or report.get('detail') or 'no reason given'}."
        )
    elif not result.finished:
        raise CliError(
            f"Agent runtime is still {report['status']} after {int(result.elapsed_s)}s.",
            hint="Check later with `deploy-agent status`, or raise --wait-timeout.",
        )
    return report


@app.command()
def deploy(
    bedrock_model_id: BedrockModelId = None,
    yes: Yes = False,
    wait_timeout: WaitTimeout = 1800,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Deploy the KokoroAgentRuntime stack (needs the TTS stacks) and wait for the runtime to be READY."""
    with cli_errors():
        target, _ = connect(region=region, profile=profile)  # credentials first: a missing login says so
        model, model_source = resolve_bedrock_model_id(target=target, requested=bedrock_model_id, strict=True)
        prereq, endpoint = tts_prerequisites(target=target)
        ident = run_preflight(target=target, extra=region_checks(target=target, model=model) + [
            prereq, check_model_access(target=target, model=model), check_first_call(target=target, model=model)],
            platforms=("linux/arm64",))
        context: dict[str, str | int | None] = {"endpointName": endpoint, "bedrockModelId": model}
        err_console().print(
            f"Deploying {AGENT_STACK} to account [bold]{ident['account']}[/] in [bold]{target.region}[/]\n  "
            + " ".join(context_args(context)) + f"\n  (bedrockModelId: {model_source})"
        )
        confirm_or_abort(yes=yes, ask=confirm)
        steps = Steps(total=2)
        with steps.step(f"Deploy {AGENT_STACK}"):
            cdk_deploy(target=target, stack=AGENT_STACK, context=context)
        with steps.step("Wait for the agent runtime to be READY"):
            outputs = stack_outputs(get_stack(target.client("cloudformation"), AGENT_STACK))
            require_outputs(AGENT_STACK, outputs, "RuntimeArn", "RuntimeId")
            wait_for_runtime(target=target, outputs=outputs, timeout_s=wait_timeout)
        flags = target_flags(region, profile)
        out = out_console()
        out.print(f"[green]Agent runtime {outputs.get('RuntimeName') or outputs['RuntimeId']} deployed[/] "
                  f"(total {steps.elapsed()}).")
        out.print(f"  RuntimeArn: {outputs['RuntimeArn']}")
        out.print(f"Next: deploy-agent status{flags}")
        out.print(f"      deploy-agent chat --help{flags}")


@app.command()
def diff(
    bedrock_model_id: BedrockModelId = None,
    fail: FailOnDiff = False,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Show `cdk diff` of the KokoroAgentRuntime stack (exit code of cdk)."""
    with cli_errors():
        target, _ = connect(region=region, profile=profile)
        endpoint = stack_outputs(get_stack(target.client("cloudformation"), ENDPOINT_STACK)).get("EndpointName")
        model, _ = resolve_bedrock_model_id(target=target, requested=bedrock_model_id, strict=True)
        context: dict[str, str | int | None] = {"endpointName": endpoint, "bedrockModelId": model}
        code = cdk_diff(target=target, stacks=[AGENT_STACK], context=context, fail=fail)
    raise typer.Exit(code=code)


@app.command()
def status(as_json: JsonOutput = False, region: Region = None, profile: Profile = None) -> None:
    """Report the agent stack, the AgentCore runtime status, and the TTS stacks it depends on."""
    with cli_errors():
        target, ident = connect(region=region, profile=profile)
        stacks = stack_report(target=target, names=STATUS_STACKS)
        outputs = {row["name"]: row["outputs"] for row in stacks}
        report: dict[str, Any] = {"account": ident["account"], "region": target.region, "stacks": stacks}
        endpoint = outputs[ENDPOINT_STACK].get("EndpointName")
        if endpoint:
            report["endpoint"] = endpoint_report(target=target, name=endpoint)
        report["runtime"] = runtime_report(target=target, outputs=outputs[AGENT_STACK])
        render_report(report, as_json=as_json)


@app.command()
def teardown(
    all_leftovers: Annotated[
        bool, typer.Option("--all", help="Also delete the runtime's log groups and the agent's asset image.")
    ] = False,
    delete_images: DeleteImages = False,
    yes: Yes = False,
    wait_timeout: WaitTimeout = 1800,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Delete the KokoroAgentRuntime stack (the TTS stacks are left to `deploy-tts teardown`)."""
    with cli_errors():
        target, _ = connect(region=region, profile=profile)
        runtime = stack_outputs(get_stack(target.client("cloudformation"), AGENT_STACK)).get("RuntimeName")
        teardown_stacks(
            target=target, delete_order=[AGENT_STACK], empty_buckets_of=[], app_stacks=list(ALL_STACKS),
            with_images=delete_images or all_leftovers, yes=yes, ask=confirm, timeout_s=wait_timeout,
            log_groups=[runtime_log_groups(runtime or DEFAULT_RUNTIME_NAME)] if all_leftovers else [],
        )


# --- Commands defined in their own modules -----------------------------------------------
from cli.agent_chat import chat  # noqa: E402

app.command("chat")(chat)


def main() -> None:
    """Console-script entry point (pyproject: deploy-agent = "cli.deploy_agent:main")."""
    app()
