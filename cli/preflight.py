"""Checks run by `deploy` before anything slow: every missing piece is reported at once.

A CDK deploy that fails after ten minutes of image builds because the account was never
bootstrapped (or Docker was not running) is the most expensive way to learn that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from rich.markup import escape
from rich.table import Table

from cli.aws import AwsTarget, CliError, caller_identity, describe_error, get_stack, is_client_error
from cli.cdk import (
    BOOTSTRAP_QUALIFIER,
    ToolCheck,
    bootstrap_command,
    check_build_platforms,
    check_cdk_cli,
    check_docker,
    check_node,
)
from cli.progress import err_console

BOOTSTRAP_PARAM = f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version"
BOOTSTRAP_STACK = "CDKToolkit"


def check_bootstrap(*, target: AwsTarget, account: str) -> ToolCheck:
    """CDK needs its bootstrap resources (asset bucket + ECR repo) in this account/region, made with
    the qualifier the stacks synthesize with (cdk.json's, read by infra/defaults.py for both)."""
    hint = ("Bootstrap once per account/region (qualifier from cdk.json): "
            + bootstrap_command(account=account, region=target.region, profile=target.profile))
    try:
        param = target.client("ssm").get_parameter(Name=BOOTSTRAP_PARAM)["Parameter"]
        return ToolCheck("CDK bootstrap", True, f"version {param.get('Value', '?')} ({BOOTSTRAP_PARAM})")
    except ClientError as exc:
        if not is_client_error(exc, "ParameterNotFound") and "AccessDenied" not in str(exc):
            return ToolCheck("CDK bootstrap", False, describe_error(exc).message, hint)
    try:
        stack = get_stack(target.client("cloudformation"), BOOTSTRAP_STACK)
    except (ClientError, BotoCoreError) as exc:
        return ToolCheck("CDK bootstrap", False, describe_error(exc).message, hint)
    if stack and str(stack["StackStatus"]).endswith("_COMPLETE") and "ROLLBACK" not in stack["StackStatus"]:
        return ToolCheck("CDK bootstrap", True, f"stack {BOOTSTRAP_STACK} {stack['StackStatus']}")
    detail = (
        f"stack {BOOTSTRAP_STACK} is {stack['StackStatus']}"
        if stack
        else f"not bootstrapped (no {BOOTSTRAP_PARAM}, no {BOOTSTRAP_STACK} stack)"
    )
    return ToolCheck("CDK bootstrap", False, detail, hint)


def render_checks(checks: Sequence[ToolCheck], *, title: str) -> None:
    """Show every check with a fix for each failing one."""
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("Check")
    table.add_column("Result")
    table.add_column("Details / how to fix", overflow="fold")
    for check in checks:
        mark = "[green]ok[/]" if check.ok else "[bold red]missing[/]"
        text = escape(check.detail) if check.ok else f"{escape(check.detail)}\n[yellow]{escape(check.hint)}[/]"
        table.add_row(check.name, mark, text)
    err_console().print(table)


def check_credentials(target: AwsTarget) -> dict[str, str]:
    """The caller identity, or one clear error when the credentials do not work."""
    try:
        return caller_identity(target)
    except (ClientError, BotoCoreError) as exc:
        error = describe_error(exc)
        raise CliError(f"Credential check failed: {error.message}", hint=error.hint) from exc


def run_preflight(
    *,
    target: AwsTarget,
    extra: Sequence[ToolCheck] = (),
    need_docker: bool = True,
    platforms: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Check credentials, region, bootstrap, node, the CDK CLI, Docker and the image ``platforms``
    its builder must produce; raise if any is missing.

    Credentials are checked first and alone: without them no AWS-side check can run.
    Returns the caller identity.
    """
    ident = check_credentials(target)
    checks = [
        ToolCheck("credentials", True, ident["arn"]),
        ToolCheck("region", True, target.region),
        check_bootstrap(target=target, account=ident["account"]),
        *extra,
        check_node(),
        check_cdk_cli(),
    ]
    if need_docker:
        docker = check_docker()
        checks.append(docker)
        if docker.ok and platforms:
            checks.append(check_build_platforms(platforms))
    failed = [c for c in checks if not c.ok]
    render_checks(checks, title="Preflight")
    if failed:
        names = ", ".join(c.name for c in failed)
        raise CliError(
            f"Preflight failed: {names} not ready (details above); nothing was deployed.",
            hint=failed[0].hint or None,
        )
    return ident
