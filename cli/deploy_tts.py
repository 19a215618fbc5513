"""`deploy-tts`: deploy, diff, inspect and tear down the Kokoro TTS SageMaker endpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.aws import (
    AwsTarget,
    CliError,
    cli_errors,
    get_stack,
    make_target,
    require_outputs,
    stack_outputs,
)
from cli.aws_checks import endpoint_quota
from cli.bedrock import resolve_bedrock_model_id
from cli.cdk import ToolCheck, cdk_deploy, cdk_diff
from cli.commands import command_app, confirm_or_abort, connect, teardown_stacks
from cli.live import live_report
from cli.model_cache import sync_model_cache
from cli.model_sources import MODEL_REPO_ID, HuggingFaceSource, LocalDirSource, ModelSource
from cli.options import (
    DEFAULT_ENDPOINT_NAME,
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_MAX_INSTANCES,
    DEFAULT_RUNTIME_NAME,
    AlarmEmail,
    DeleteImages,
    EndpointName,
    EngineOpt,
    FailOnDiff,
    InstanceType,
    JsonOutput,
    MaxInstances,
    MinInstances,
    ModelRevision,
    PlannedInstanceType,
    Profile,
    Region,
    WaitTimeout,
    Yes,
    target_flags,
)
from cli.plan import load_prices, make_plan, resolve_capacity
from cli.plan import render as render_plan_text
from cli.preflight import check_credentials, run_preflight
from cli.progress import Steps, byte_progress, confirm, err_console, out_console, poll_until
from cli.scaling import AUTOSCALING_KEY, release_for_instance_change, restore_from_stack
from cli.stacks import AGENT_STACK, ENDPOINT_STACK, FOUNDATION_STACK, MODEL_CACHE_STACK, TTS_STACKS
from cli.status import NOT_FOUND, cache_report, endpoint_report, render_report, stack_report
from cli.teardown import endpoint_log_group, runtime_log_groups
from cli.tts_context import FLAGS, check_flags, deployed_context, flag_context, plan_settings, quota_check

app = command_app(name="deploy-tts", help="Deploy and manage the Kokoro-82M TTS endpoint on Amazon SageMaker.")

ModelDir = Annotated[
    Path | None,
    typer.Option(
        "--model-dir",
        help="Upload the model from this local directory (config.json, kokoro-v1_0.pth, voices/*.pt) "
        "instead of downloading it from Hugging Face.",
    ),
]
ENDPOINT_DONE = {"InService"}
ENDPOINT_FAILED = {"Failed", "OutOfService", "Deleting", "UpdateRollbackFailed"}


def _model_source_check(source: ModelSource) -> ToolCheck:
    """A local model dir is read before anything is deployed; Hugging Face is reached during the sync."""
    if isinstance(source, HuggingFaceSource):
        return ToolCheck("model source", True, source.label)
    try:
        files = source.list_files()
    except CliError as exc:
        return ToolCheck("model source", False, exc.message, "Pass --model-dir pointing at the model directory.")
    names = {f.path for f in files}
    if "config.json" not in names or not any(n.endswith(".pth") for n in names):
        return ToolCheck(
            "model source",
            False,
            f"{source.label} lacks config.json or kokoro-v1_0.pth",
            "The directory must hold config.json, kokoro-v1_0.pth and voices/*.pt.",
        )
    return ToolCheck("model source", True, f"{source.label} ({len(files)} files)")


def wait_for_endpoint(*, target: AwsTarget, name: str, timeout_s: float, interval_s: float = 15) -> dict[str, Any]:
    """Poll the endpoint until InService (or a failure state) with a live status line."""
    result = poll_until(
        fetch=lambda: endpoint_report(target=target, name=name),
        is_done=lambda r: r["status"] in ENDPOINT_DONE | ENDPOINT_FAILED | {NOT_FOUND},
        describe=lambda r: f"Endpoint [bold]{name}[/]: {r['status']}",
        timeout_s=timeout_s,
        interval_s=interval_s,
    )
    report = result.value
    if report["status"] == NOT_FOUND:
        raise CliError(f"Endpoint {name} does not exist although {ENDPOINT_STACK} deployed.")
    if report["status"] in ENDPOINT_FAILED:
        raise CliError(
            f"Endpoint {name} is {report['status']}: {report.get('failure_reason') or 'no reason given'}.",
            hint="See the endpoint's CloudWatch logs (/aws/sagemaker/Endpoints/" + name + ").",
        )
    if not result.finished:
        raise CliError(
            f"Endpoint {name} is still {report['status']} after {int(result.elapsed_s)}s.",
            hint="It keeps going in the background; check with `deploy-tts status`, or raise --wait-timeout.",
        )
    return report


def deploy_endpoint_stack(*, target: AwsTarget, context: dict[str, str | int | None]) -> None:
    """`cdk deploy` the endpoint; an instance-type change goes through cli/scaling.py's three steps."""
    console = err_console()
    endpoint, instance_type = str(context["endpointName"]), str(context["instanceType"])
    released = release_for_instance_change(target=target, endpoint=endpoint, instance_type=instance_type)
    if released is None:
        cdk_deploy(target=target, stack=ENDPOINT_STACK, context=context, import_existing=True)
        return
    console.print(f"Instance type {released.old_type} -> {released.new_type}: autoscaling of {endpoint} "
                  f"deregistered first (policies {', '.join(released.policies) or 'none'}), as SageMaker "
                  "refuses to change the instance type of an autoscaled variant", markup=False)
    try:
        cdk_deploy(target=target, stack=ENDPOINT_STACK, context={**context, AUTOSCALING_KEY: "false"},
                   import_existing=True)
    except CliError:
        for line in restore_from_stack(target=target, stack=ENDPOINT_STACK, endpoint=endpoint):
            console.print(f"Autoscaling restored as before: {line}", markup=False)
        raise
    console.print(f"Endpoint on {instance_type}; adding autoscaling back", markup=False)
    cdk_deploy(target=target, stack=ENDPOINT_STACK, context=context, import_existing=True)


@app.command()
def deploy(
    instance_type: InstanceType = None,
    engine: EngineOpt = None,
    endpoint_name: EndpointName = None,
    min_instances: MinInstances = None,
    max_instances: MaxInstances = None,
    model_dir: ModelDir = None,
    model_revision: ModelRevision = None,
    alarm_email: AlarmEmail = None,
    yes: Yes = False,
    wait_timeout: WaitTimeout = 3600,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Deploy Foundation, ModelCache (then sync the model into it) and Endpoint, then wait for InService.

    Settings without a flag keep their deployed values; the plan shows every change first."""
    with cli_errors():
        flags = flag_context(instance_type=instance_type, engine=engine.value if engine else None,
                             endpoint_name=endpoint_name, min_instances=min_instances, max_instances=max_instances,
                             model_revision=model_revision, alarm_email=alarm_email)
        check_flags(flags)
        target = make_target(profile=profile, region=region)
        check_credentials(target)
        plan = plan_settings(flags, deployed_context(target))
        context = dict(plan.context)
        revision = str(context["modelRevision"])
        source: ModelSource = LocalDirSource(model_dir) if model_dir else HuggingFaceSource(MODEL_REPO_ID, revision)
        ident = run_preflight(target=target, extra=[_model_source_check(source), quota_check(target, context)],
                              platforms=("linux/amd64",))
        # The foundation is redeployed too: keep the Bedrock grant the agent's deploy chose.
        context["bedrockModelId"], model_source = resolve_bedrock_model_id(target=target, requested=None, strict=False)
        console = err_console()
        console.print(f"Deploying to account [bold]{ident['account']}[/] in [bold]{target.region}[/]: "
                      f"{', '.join(TTS_STACKS)}")
        console.print("\n".join([*plan.lines(), f"  bedrockModelId {context['bedrockModelId']} ({model_source})"]),
                      markup=False, highlight=False)
        confirm_or_abort(yes=yes, ask=confirm)
        steps = Steps(total=5)
        with steps.step(f"Deploy {FOUNDATION_STACK}"):
            cdk_deploy(target=target, stack=FOUNDATION_STACK, context=context)
        with steps.step(f"Deploy {MODEL_CACHE_STACK}"):
            cdk_deploy(target=target, stack=MODEL_CACHE_STACK, context=context)
        with steps.step(f"Sync model files from {source.label}"):
            cache = stack_outputs(get_stack(target.client("cloudformation"), MODEL_CACHE_STACK))
            require_outputs(MODEL_CACHE_STACK, cache, "BucketName", "ModelPrefix")
            with byte_progress(console) as progress:
                result = sync_model_cache(
                    s3=target.client("s3"),
                    bucket=cache["BucketName"],
                    prefix=cache["ModelPrefix"],
                    source=source,
                    revision=revision,
                    progress=progress,
                )
            console.print(f"Model cache s3://{result.bucket}/{result.prefix}: {result.summary}")
        with steps.step(f"Deploy {ENDPOINT_STACK}"):
            deploy_endpoint_stack(target=target, context=context)
        with steps.step("Wait for the endpoint to be InService"):
            outputs = stack_outputs(get_stack(target.client("cloudformation"), ENDPOINT_STACK))
            require_outputs(ENDPOINT_STACK, outputs, "EndpointName")
            wait_for_endpoint(target=target, name=outputs["EndpointName"], timeout_s=wait_timeout)
        flags_again = target_flags(region, profile)
        out = out_console()
        out.print(f"[green]Endpoint {outputs['EndpointName']} is InService[/] (total {steps.elapsed()}).")
        if context.get("alarmEmail") and context.get("alarmEmail") != plan.baseline.get("alarmEmail"):
            out.print(f"Alarms mail {context['alarmEmail']} once the address follows the link in SNS's "
                      "confirmation mail.")
        out.print(f"Next: deploy-tts status{flags_again}")
        out.print(f"      deploy-tts say --help{flags_again}")
        out.print(f"      deploy-agent deploy{flags_again}   (the voice agent that speaks through this endpoint)")


@app.command()
def diff(
    instance_type: InstanceType = None,
    engine: EngineOpt = None,
    endpoint_name: EndpointName = None,
    min_instances: MinInstances = None,
    max_instances: MaxInstances = None,
    model_revision: ModelRevision = None,
    alarm_email: AlarmEmail = None,
    deployed: Annotated[
        bool, typer.Option("--deployed", help="Diff with exactly the deployed settings (refuses setting flags); "
                           "without flags that is also the default. What CI runs.")
    ] = False,
    fail: FailOnDiff = False,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """`cdk diff` of the three TTS stacks: what `deploy` with the same flags would change (exit code of cdk)."""
    with cli_errors():
        flags = flag_context(instance_type=instance_type, engine=engine.value if engine else None,
                             endpoint_name=endpoint_name, min_instances=min_instances, max_instances=max_instances,
                             model_revision=model_revision, alarm_email=alarm_email)
        if deployed and flags:
            raise CliError(f"--deployed diffs the deployed settings; drop {', '.join(FLAGS[k] for k in flags)}.")
        check_flags(flags)
        target, _ = connect(region=region, profile=profile)
        found = deployed_context(target)
        if found is None:
            err_console().print(f"{ENDPOINT_STACK} has no DeployContext output (not deployed, or deployed by an "
                                "older CLI): diffing with cdk.json's settings and the flags", markup=False)
        plan = plan_settings(flags, found)
        err_console().print("\n".join(plan.lines()), markup=False, highlight=False)
        context = dict(plan.context)
        context["bedrockModelId"], _ = resolve_bedrock_model_id(target=target, requested=None, strict=False)
        code = cdk_diff(target=target, stacks=list(TTS_STACKS), context=context, fail=fail)
    raise typer.Exit(code=code)


@app.command()
def status(
    endpoint_name: Annotated[
        str | None,
        typer.Option("--endpoint-name",
                     help="Endpoint to describe (default: the Endpoint stack's output, else kokoro-tts)."),
    ] = None,
    as_json: JsonOutput = False,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Report stacks, endpoint status/instances and the model-cache manifest."""
    with cli_errors():
        target, ident = connect(region=region, profile=profile)
        stacks = stack_report(target=target, names=TTS_STACKS)
        outputs: dict[str, Any] = {row["name"]: row["outputs"] for row in stacks}
        name = endpoint_name or outputs[ENDPOINT_STACK].get("EndpointName") or DEFAULT_ENDPOINT_NAME
        report: dict[str, Any] = {
            "account": ident["account"],
            "region": target.region,
            "stacks": stacks,
            "endpoint": endpoint_report(target=target, name=name),
            "model_cache": cache_report(target=target, outputs=outputs[MODEL_CACHE_STACK]),
        }
        if report["endpoint"]["status"] == "InService":
            report["live"] = live_report(target=target, name=name)
        render_report(report, as_json=as_json)


@app.command()
def plan(
    sessions: Annotated[int, typer.Option("--sessions", help="Concurrent sessions to serve at peak.")],
    instance_type: PlannedInstanceType = DEFAULT_INSTANCE_TYPE,
    sessions_per_instance: Annotated[
        int | None,
        typer.Option("--sessions-per-instance",
                     help="Your own measured capacity of one instance (default: bench/results' figure, else "
                     "for ml.g5.xlarge the stack's labelled estimate)."),
    ] = None,
    max_instances: Annotated[int, typer.Option("--max-instances", min=1, help="The maxInstances to check "
                                               "against (default: cdk.json's).")] = DEFAULT_MAX_INSTANCES,
    as_json: JsonOutput = False,
    region: Annotated[str | None, typer.Option("--region", help="Read the account's instance quota in this "
                                               "Region (default: offline, no quota check).")] = None,
    profile: Profile = None,
) -> None:
    """Instances, scaling target and hourly cost for N sessions; checked against maxInstances and the quota."""
    with cli_errors():
        capacity = resolve_capacity(instance_type, sessions_per_instance)
        quota = None
        if region or profile:
            found = endpoint_quota(target=make_target(profile=profile, region=region), instance_type=instance_type)
            quota = found.value if found else 0
        result = make_plan(sessions=sessions, instance_type=instance_type, capacity=capacity, prices=load_prices(),
                           max_instances=max_instances, quota=quota)
        if as_json:
            print(json.dumps(result.to_json(), indent=2))
        else:
            out_console().print(render_plan_text(result), markup=False, highlight=False)


@app.command()
def teardown(
    all_stacks: Annotated[
        bool, typer.Option("--all", help="Delete everything: the three stacks, both buckets (every version), "
                           "the endpoint's and the agent runtime's log groups and the TTS image.")
    ] = False,
    keep_model_cache: Annotated[
        bool, typer.Option("--keep-model-cache", help="With --all: keep the model cache (its stack, bucket and "
                           "the foundation its read grant attaches to), so a later deploy skips the download.")
    ] = False,
    delete_images: DeleteImages = False,
    yes: Yes = False,
    wait_timeout: WaitTimeout = 1800,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Delete the Endpoint stack; with --all, everything the TTS stacks created (see --keep-model-cache)."""
    with cli_errors():
        if keep_model_cache and not all_stacks:
            raise CliError("--keep-model-cache only makes sense with --all.")
        target, _ = connect(region=region, profile=profile)
        everything = all_stacks and not keep_model_cache
        order = [ENDPOINT_STACK, *([MODEL_CACHE_STACK, FOUNDATION_STACK] if everything else [])]
        cfn = target.client("cloudformation")
        if get_stack(cfn, AGENT_STACK) is not None:
            raise CliError(
                f"{AGENT_STACK} is still deployed and depends on the TTS stacks; nothing was deleted.",
                hint=f"Run `deploy-agent teardown{target_flags(region, profile)}` first.",
            )
        endpoint = stack_outputs(get_stack(cfn, ENDPOINT_STACK)).get("EndpointName") or DEFAULT_ENDPOINT_NAME
        # The runtime name the foundation's agent role was scoped to (deploy-agent may have used another).
        runtime = stack_outputs(get_stack(cfn, FOUNDATION_STACK)).get("AgentRuntimeName") or DEFAULT_RUNTIME_NAME
        teardown_stacks(
            target=target, delete_order=order, empty_buckets_of=[MODEL_CACHE_STACK],
            app_stacks=[*TTS_STACKS, AGENT_STACK], with_images=delete_images or all_stacks, yes=yes, ask=confirm,
            timeout_s=wait_timeout, remove_buckets=everything,
            log_groups=[endpoint_log_group(endpoint), runtime_log_groups(runtime)] if all_stacks else [],
        )
        if keep_model_cache:
            err_console().print(f"Kept {MODEL_CACHE_STACK} and {FOUNDATION_STACK} (--keep-model-cache).")
        elif not all_stacks:
            err_console().print("Model cache and foundation kept; `deploy-tts teardown --all` removes them too.")


# --- Commands defined in their own modules -----------------------------------------------
from cli.tts_say import say  # noqa: E402

app.command("say")(say)


def main() -> None:
    """Console-script entry point (pyproject: deploy-tts = "cli.deploy_tts:main")."""
    app()
