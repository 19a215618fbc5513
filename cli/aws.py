"""AWS session handling and the mapping of botocore failures to one-line CLI errors.

Every command runs its body inside :func:`cli_errors`, so an expected AWS failure (bad
credentials, a missing resource, no network) ends with a readable message and exit code 1
instead of a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.session
import typer
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
    WaiterError,
)
from rich.markup import escape

from cli.progress import err_console

STACK_MISSING_CODES = frozenset({"ValidationError"})
_REGION_RE = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
_CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AuthFailure",
    }
)
CREDENTIALS_HINT = (
    "Configure credentials with `aws configure` or `aws sso login --profile NAME`, "
    "or set AWS_PROFILE / AWS_ACCESS_KEY_ID, then pass --profile NAME if needed."
)


class CliError(Exception):
    """An expected failure: printed as one line (plus an optional hint), exit code 1."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass
class AwsTarget:
    """A boto3 session bound to a resolved region; clients are created from it (once each)."""

    session: boto3.Session
    region: str
    profile: str | None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def client(self, service: str) -> Any:
        """Return a client in the target region (AWS_ENDPOINT_URL* is honoured by boto3)."""
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=self.region)
        return self._clients[service]


_shared_loader: Any = None


def _botocore_session() -> botocore.session.Session:
    """A fresh botocore session that reuses the already parsed service models.

    Parsing e.g. the SageMaker model costs a quarter second per session; a process that
    creates several sessions (each command, the tests) pays it only once this way.
    """
    global _shared_loader
    session = botocore.session.Session()
    if _shared_loader is None:
        _shared_loader = session.get_component("data_loader")
    else:
        session.register_component("data_loader", _shared_loader)
    return session


def make_target(*, profile: str | None, region: str | None) -> AwsTarget:
    """Resolve --profile/--region the way the AWS CLI does, failing early when no region is set."""
    try:
        session = boto3.Session(profile_name=profile, region_name=region, botocore_session=_botocore_session())
        resolved = session.region_name
    except ProfileNotFound as exc:
        raise describe_error(exc) from exc
    if not resolved:
        raise CliError(
            "No AWS region set.",
            hint="Pass --region (e.g. --region us-east-1), set AWS_REGION, "
            "or add `region = ...` to your profile.",
        )
    if not _REGION_RE.fullmatch(resolved):
        raise CliError(f"{resolved!r} does not look like an AWS region.", hint="Use e.g. us-east-1.")
    return AwsTarget(session=session, region=resolved, profile=profile)


def caller_identity(target: AwsTarget) -> dict[str, str]:
    """Check that the credentials work (sts get-caller-identity) and return account + ARN."""
    ident = target.client("sts").get_caller_identity()
    return {"account": str(ident["Account"]), "arn": str(ident["Arn"])}


def is_client_error(exc: BaseException, *codes: str) -> bool:
    """True when ``exc`` is a ClientError with one of ``codes``."""
    return isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in codes


def describe_error(exc: BaseException) -> CliError:
    """Turn a botocore failure into a CliError with a message a user can act on."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return CliError("No usable AWS credentials found.", hint=CREDENTIALS_HINT)
    if isinstance(exc, SSOError | TokenRetrievalError):
        return CliError(f"AWS SSO login needed: {exc}", hint="Run `aws sso login --profile NAME`.")
    if isinstance(exc, ProfileNotFound):
        return CliError(
            f"AWS profile {exc.kwargs.get('profile')!r} not found.",
            hint="List profiles with `aws configure list-profiles`, or check AWS_CONFIG_FILE.",
        )
    if isinstance(exc, NoRegionError):
        return CliError("No AWS region set.", hint="Pass --region or set AWS_REGION.")
    if isinstance(exc, EndpointConnectionError):
        return CliError(
            f"Could not reach {exc.kwargs.get('endpoint_url', 'the AWS endpoint')}.",
            hint="Check your network/proxy, and that the service exists in this region.",
        )
    if isinstance(exc, WaiterError):
        reason = exc.last_response.get("Error", {}).get("Message") if exc.last_response else None
        return CliError(f"Gave up waiting ({exc.name}): {reason or exc.reason}.")
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "Unknown"))
        message = str(err.get("Message", "")).strip() or code
        op = exc.operation_name
        if code in _CREDENTIAL_CODES:
            return CliError(f"AWS rejected the credentials ({code}): {message}", hint=CREDENTIALS_HINT)
        if "AccessDenied" in code or code == "UnauthorizedOperation":
            return CliError(
                f"Access denied for {op}: {message}",
                hint="The identity in use needs permission for this action (see docs/cli.md).",
            )
        return CliError(f"{op} failed ({code}): {message}")
    if isinstance(exc, BotoCoreError):
        return CliError(f"AWS SDK error: {exc}")
    return CliError(str(exc))


def print_error(error: CliError) -> None:
    """Print an error on stderr: one line, plus a hint line when there is one."""
    console = err_console()
    console.print(f"[bold red]Error:[/] {escape(error.message)}", markup=True, highlight=False)
    if error.hint:
        console.print(f"[yellow]Hint:[/] {escape(error.hint)}", markup=True, highlight=False)


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print expected failures as one line and exit 1; let real bugs raise normally."""
    try:
        yield
    except (CliError, BotoCoreError, ClientError) as exc:
        print_error(describe_error(exc))
        raise typer.Exit(code=1) from None


def get_stack(cfn: Any, name: str) -> dict[str, Any] | None:
    """Describe a CloudFormation stack, or None when it does not exist (or is deleted)."""
    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        if is_client_error(exc, *STACK_MISSING_CODES) and "does not exist" in str(exc):
            return None
        raise
    live = [s for s in stacks if s.get("StackStatus") != "DELETE_COMPLETE"]
    return live[0] if live else None


def stack_outputs(stack: dict[str, Any] | None) -> dict[str, str]:
    """Return a stack's CfnOutputs as a plain mapping (empty when there is no stack)."""
    if not stack:
        return {}
    return {o["OutputKey"]: str(o.get("OutputValue", "")) for o in stack.get("Outputs", [])}


def require_outputs(stack_name: str, outputs: dict[str, str], *keys: str) -> None:
    """Fail clearly when the infra did not publish an output the CLI depends on."""
    missing = [k for k in keys if not outputs.get(k)]
    if missing:
        raise CliError(
            f"Stack {stack_name} has no output(s) {', '.join(missing)}.",
            hint="The stack is older than this CLI or failed half-way; redeploy it.",
        )
