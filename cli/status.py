"""The `status` report: stacks, the SageMaker endpoint, the model cache and the agent runtime.

Each part is gathered on its own and degrades to a clear state ("not deployed", "not
available: ...") so one missing piece never hides the rest of the report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, UnknownServiceError
from rich.markup import escape
from rich.table import Table

from cli.aws import AwsTarget, describe_error, get_stack, is_client_error, stack_outputs
from cli.model_cache import manifest_summary, read_manifest
from cli.progress import format_bytes, out_console

NOT_DEPLOYED = "NOT_DEPLOYED"
NOT_FOUND = "NOT_FOUND"
UNAVAILABLE = "UNAVAILABLE"


def stack_report(*, target: AwsTarget, names: Sequence[str]) -> list[dict[str, Any]]:
    """Status, reason and outputs of each named stack; NOT_DEPLOYED when it does not exist."""
    cfn = target.client("cloudformation")
    rows: list[dict[str, Any]] = []
    for name in names:
        stack = get_stack(cfn, name)
        if stack is None:
            rows.append({"name": name, "status": NOT_DEPLOYED, "outputs": {}})
            continue
        updated = stack.get("LastUpdatedTime") or stack.get("CreationTime")
        rows.append(
            {
                "name": name,
                "status": stack["StackStatus"],
                "reason": stack.get("StackStatusReason"),
                "updated": updated.isoformat() if updated else None,
                "outputs": stack_outputs(stack),
            }
        )
    return rows


def endpoint_report(*, target: AwsTarget, name: str) -> dict[str, Any]:
    """Endpoint status with the instance type (from its config) and current/desired instance counts."""
    sm = target.client("sagemaker")
    try:
        ep = sm.describe_endpoint(EndpointName=name)
    except ClientError as exc:
        if is_client_error(exc, "ValidationException") and "Could not find" in str(exc):
            return {"name": name, "status": NOT_FOUND}
        raise
    variants = ep.get("ProductionVariants") or [{}]
    variant = variants[0]
    report: dict[str, Any] = {
        "name": name,
        "status": ep["EndpointStatus"],
        "config": ep.get("EndpointConfigName"),
        "variant": variant.get("VariantName"),
        "current_instance_count": variant.get("CurrentInstanceCount"),
        "desired_instance_count": variant.get("DesiredInstanceCount"),
        "failure_reason": ep.get("FailureReason"),
        "instance_type": None,
    }
    if ep.get("EndpointConfigName"):
        try:
            config = sm.describe_endpoint_config(EndpointConfigName=ep["EndpointConfigName"])
        except ClientError as exc:
            report["instance_type"] = f"unknown ({describe_error(exc).message})"
        else:
            by_name: dict[str, dict[str, Any]] = {
                v.get("VariantName"): v for v in config.get("ProductionVariants", [])
            }
            chosen: dict[str, Any] = by_name.get(variant.get("VariantName")) or next(iter(by_name.values()), {})
            report["instance_type"] = chosen.get("InstanceType") or (
                "serverless" if chosen.get("ServerlessConfig") else None
            )
    return report


def cache_report(*, target: AwsTarget, outputs: dict[str, str]) -> dict[str, Any]:
    """The model-cache manifest facts, read from the bucket the ModelCache stack published."""
    bucket, prefix = outputs.get("BucketName"), outputs.get("ModelPrefix")
    if not bucket or not prefix:
        return {"status": NOT_DEPLOYED}
    report: dict[str, Any] = {"bucket": bucket, "prefix": prefix}
    try:
        manifest = read_manifest(s3=target.client("s3"), bucket=bucket, prefix=prefix)
    except ClientError as exc:
        return {**report, "status": "ERROR", "detail": describe_error(exc).message}
    if manifest is None:
        return {**report, "status": "EMPTY", "detail": "no manifest.json: the model was never synced"}
    return {**report, "status": "SYNCED", **manifest_summary(manifest)}


def runtime_report(*, target: AwsTarget, outputs: dict[str, str]) -> dict[str, Any]:
    """AgentCore runtime status via bedrock-agentcore-control; says so when the API is not there."""
    runtime_id = outputs.get("RuntimeId")
    if not runtime_id:
        return {"status": NOT_DEPLOYED}
    base = {"id": runtime_id, "arn": outputs.get("RuntimeArn"), "name": outputs.get("RuntimeName")}
    try:
        client = target.client("bedrock-agentcore-control")
        rt = client.get_agent_runtime(agentRuntimeId=runtime_id)
    except UnknownServiceError:
        detail = "this boto3 has no bedrock-agentcore-control client; upgrade boto3"
        return {**base, "status": UNAVAILABLE, "detail": detail}
    except EndpointConnectionError as exc:
        detail = (
            f"could not reach the AgentCore control API ({exc.kwargs.get('endpoint_url')}); "
            f"AgentCore may not be offered in {target.region}"
        )
        return {**base, "status": UNAVAILABLE, "detail": detail}
    except ClientError as exc:
        if is_client_error(exc, "ResourceNotFoundException"):
            return {**base, "status": NOT_FOUND, "detail": "runtime not found (deleted outside CloudFormation?)"}
        return {**base, "status": UNAVAILABLE, "detail": describe_error(exc).message}
    except BotoCoreError as exc:
        return {**base, "status": UNAVAILABLE, "detail": describe_error(exc).message}
    updated = rt.get("lastUpdatedAt")
    return {
        **base,
        "status": rt.get("status"),
        "name": rt.get("agentRuntimeName", base["name"]),
        "version": rt.get("agentRuntimeVersion"),
        "failure_reason": rt.get("failureReason"),
        "updated": updated.isoformat() if updated else None,
    }


def _style(status: str | None) -> str:
    text = str(status or "?")
    if text in (NOT_DEPLOYED, NOT_FOUND, "EMPTY"):
        return f"[dim]{text.replace('_', ' ').lower()}[/]"
    if "FAILED" in text or "ROLLBACK" in text or text in ("Failed", UNAVAILABLE, "ERROR", "CREATE_FAILED"):
        return f"[red]{text}[/]"
    if text.endswith("_COMPLETE") or text in ("InService", "READY", "SYNCED"):
        return f"[green]{text}[/]"
    return f"[yellow]{text}[/]"


def render_report(report: dict[str, Any], *, as_json: bool) -> None:
    """Print the report as Rich tables, or as JSON (stdout only) for scripts."""
    if as_json:
        # Plain print: Rich would wrap long values at the terminal width and break the JSON.
        print(json.dumps(report, indent=2, default=str))
        return
    console = out_console()
    console.print(f"Account [bold]{report['account']}[/]  region [bold]{report['region']}[/]")
    stacks = Table(title="Stacks", title_justify="left")
    for column in ("Stack", "Status", "Outputs"):
        stacks.add_column(column, overflow="fold")
    for row in report["stacks"]:
        outs = "\n".join(f"{k}={v}" for k, v in sorted(row["outputs"].items()))
        stacks.add_row(row["name"], _style(row["status"]), escape(outs) or "-")
    console.print(stacks)
    details = Table(title="Resources", title_justify="left", show_header=False)
    details.add_column("What", style="bold")
    details.add_column("Value", overflow="fold")
    if "endpoint" in report:
        ep = report["endpoint"]
        details.add_row("Endpoint", f"{ep['name']}  {_style(ep['status'])}")
        if ep["status"] != NOT_FOUND:
            details.add_row("  instance type", str(ep.get("instance_type")))
            details.add_row(
                "  instances",
                f"{ep.get('current_instance_count')} current / {ep.get('desired_instance_count')} desired",
            )
            if ep.get("failure_reason"):
                details.add_row("  failure", f"[red]{escape(str(ep['failure_reason']))}[/]")
    if report.get("live"):
        from cli.live import live_rows

        for what, value in live_rows(report["live"]):
            details.add_row(what, value)
    if "model_cache" in report:
        mc = report["model_cache"]
        details.add_row("Model cache", _style(mc["status"]))
        if mc.get("bucket"):
            details.add_row("  location", f"s3://{mc['bucket']}/{mc['prefix']}")
        if mc["status"] == "SYNCED":
            details.add_row("  model", f"{mc['model']} @ {mc['revision']}")
            details.add_row("  files",
                            f"{mc['file_count']} files, {format_bytes(mc['total_bytes'])} ({mc['total_bytes']} bytes)")
            details.add_row("  synced at", str(mc.get("synced_at")))
        elif mc.get("detail"):
            details.add_row("  detail", escape(str(mc["detail"])))
    if "runtime" in report:
        rt = report["runtime"]
        shown = "[red]not available[/]" if rt["status"] == UNAVAILABLE else _style(rt["status"])
        details.add_row("Agent runtime", f"{rt.get('name') or ''}  {shown}".strip())
        for key in ("id", "arn", "version", "failure_reason", "detail"):
            if rt.get(key):
                details.add_row(f"  {key.replace('_', ' ')}", escape(str(rt[key])))
    console.print(details)
