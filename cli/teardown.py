"""`teardown`: delete this app's stacks with CloudFormation directly (no CDK CLI needed).

Safe to rerun: a stack that is not there is skipped with a message, a bucket is emptied of
every object version before its stack is deleted (CloudFormation cannot delete a non-empty
bucket), and CDK asset images are only deleted when no remaining stack of this app uses them.
What CloudFormation leaves behind on purpose is removed afterwards when the plan says so: the
RETAIN buckets (emptied again: access logs arrive late), the log groups SageMaker and AgentCore
create at run time, and the asset images. Each is reported as deleted or as left behind.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError, WaiterError
from rich.table import Table

from cli.aws import AwsTarget, CliError, caller_identity, get_stack, is_client_error, stack_outputs
from cli.cdk import gc_command
from cli.progress import err_console

BUCKET_OUTPUT_KEYS = ("BucketName", "LogBucketName")
_ASSET_IMAGE = re.compile(
    r"cdk-(?P<qualifier>[a-z0-9]+)-container-assets-"
    r"(?:\$\{AWS::AccountId\}|\d{12})-(?:\$\{AWS::Region\}|[a-z0-9-]+):(?P<tag>[A-Za-z0-9_.-]+)"
)
_WAIT_DELAY_S = 5


@dataclass(frozen=True, order=True)
class ImageRef:
    """An image in the CDK container-assets ECR repository, by tag (the asset hash)."""

    repository: str
    tag: str


@dataclass
class TeardownPlan:
    """What a teardown will delete, gathered before asking for confirmation."""

    stacks: list[tuple[str, dict[str, Any] | None]]
    buckets: dict[str, list[str]] = field(default_factory=dict)
    images: set[ImageRef] = field(default_factory=set)
    remove_buckets: bool = False  # delete the (RETAIN) buckets once their stack is gone
    log_groups: list[str] = field(default_factory=list)

    @property
    def existing(self) -> list[str]:
        return [name for name, stack in self.stacks if stack is not None]


def endpoint_log_group(endpoint: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint}"


def runtime_log_groups(runtime_name: str) -> str:
    """AgentCore names a runtime's groups after its id, ``<runtime name>-<suffix>``."""
    return f"/aws/bedrock-agentcore/runtimes/{runtime_name}-*"


def image_refs_in_template(text: str, *, account: str, region: str) -> set[ImageRef]:
    """Find CDK asset image references (tag = asset hash) in a synthesized template."""
    return {
        ImageRef(f"cdk-{m['qualifier']}-container-assets-{account}-{region}", m["tag"])
        for m in _ASSET_IMAGE.finditer(text)
    }


def stack_image_refs(*, cfn: Any, stack_name: str, account: str, region: str) -> set[ImageRef]:
    """The asset images a deployed stack's template points at (none when the stack is gone)."""
    try:
        body = cfn.get_template(StackName=stack_name)["TemplateBody"]
    except ClientError as exc:
        if is_client_error(exc, "ValidationError"):
            return set()
        raise
    text = body if isinstance(body, str) else json.dumps(body)
    return image_refs_in_template(text, account=account, region=region)


def stack_buckets(*, cfn: Any, stack: dict[str, Any]) -> list[str]:
    """S3 buckets of a stack: its bucket outputs plus every AWS::S3::Bucket resource it owns."""
    names = [v for k, v in stack_outputs(stack).items() if k in BUCKET_OUTPUT_KEYS and v]
    paginator = cfn.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=stack["StackId"]):
        for res in page.get("StackResourceSummaries", []):
            if res.get("ResourceType") == "AWS::S3::Bucket" and res.get("PhysicalResourceId"):
                names.append(res["PhysicalResourceId"])
    return list(dict.fromkeys(names))


def empty_bucket(*, s3: Any, bucket: str) -> int:
    """Delete every object version, delete marker and unfinished upload; returns versions deleted."""
    deleted = 0
    try:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            keys = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
            ]
            for start in range(0, len(keys), 1000):
                batch = keys[start : start + 1000]
                resp = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                if resp.get("Errors"):
                    first = resp["Errors"][0]
                    raise CliError(f"Could not empty s3://{bucket}: {first.get('Key')}: {first.get('Message')}")
                deleted += len(batch)
        for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
            for upload in page.get("Uploads", []):
                s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    except ClientError as exc:
        if is_client_error(exc, "NoSuchBucket"):
            return deleted
        raise
    return deleted


def delete_bucket(*, s3: Any, bucket: str) -> str:
    """Empty (every version) and delete a bucket CloudFormation retained; gone already is fine."""
    for attempt in range(3):
        count = empty_bucket(s3=s3, bucket=bucket)
        try:
            s3.delete_bucket(Bucket=bucket)
            return f"s3://{bucket}: deleted ({count} object version(s) removed first)"
        except ClientError as exc:
            if is_client_error(exc, "NoSuchBucket"):
                return f"s3://{bucket}: already gone"
            if not is_client_error(exc, "BucketNotEmpty") or attempt == 2:
                raise
    raise AssertionError("unreachable")


def find_log_groups(*, logs: Any, pattern: str) -> list[str]:
    """The log groups ``pattern`` names, or with a trailing ``*`` every group it prefixes
    (SageMaker and AgentCore create these at run time, outside any stack)."""
    prefix = pattern.removesuffix("*")
    found: list[str] = []
    for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix):
        for group in page.get("logGroups", []):
            if pattern.endswith("*") or group["logGroupName"] == pattern:
                found.append(group["logGroupName"])
    return found


def delete_log_group(*, logs: Any, name: str) -> str:
    try:
        logs.delete_log_group(logGroupName=name)
    except ClientError as exc:
        if not is_client_error(exc, "ResourceNotFoundException"):
            raise
        return f"log group {name}: already gone"
    return f"log group {name}: deleted"


def _leftovers(*, target: AwsTarget, plan: TeardownPlan) -> tuple[list[str], list[str]]:
    """Remove what the stacks leave behind; (done, failures) so one failure does not hide the rest."""
    done: list[str] = []
    failed: list[str] = []
    if plan.remove_buckets:
        for bucket in [b for buckets in plan.buckets.values() for b in buckets]:
            try:
                done.append(delete_bucket(s3=target.client("s3"), bucket=bucket))
            except (ClientError, CliError) as exc:
                failed.append(f"s3://{bucket}: {exc}")
    for name in plan.log_groups:
        try:
            done.append(delete_log_group(logs=target.client("logs"), name=name))
        except ClientError as exc:
            failed.append(f"log group {name}: {exc}")
    return done, failed


def delete_stack(*, cfn: Any, name: str, timeout_s: float) -> str:
    """Delete one stack and wait; a missing stack is a no-op. Returns a one-line result."""
    stack = get_stack(cfn, name)
    if stack is None:
        return f"{name}: not deployed, nothing to delete"
    status = str(stack["StackStatus"])
    if status.endswith("_IN_PROGRESS") and status != "DELETE_IN_PROGRESS":
        raise CliError(
            f"Stack {name} is {status}; it cannot be deleted while that runs.",
            hint="Wait for it to finish (watch with `status`), then rerun teardown.",
        )
    stack_id = stack["StackId"]
    if status != "DELETE_IN_PROGRESS":
        cfn.delete_stack(StackName=stack_id)
    attempts = max(1, math.ceil(timeout_s / _WAIT_DELAY_S))
    try:
        with err_console().status(f"Deleting {name} (up to {int(timeout_s)}s)..."):
            cfn.get_waiter("stack_delete_complete").wait(
                StackName=stack_id, WaiterConfig={"Delay": _WAIT_DELAY_S, "MaxAttempts": attempts}
            )
    except WaiterError as exc:
        now = get_stack(cfn, stack_id)
        state = f"{now['StackStatus']}: {now.get('StackStatusReason') or 'see stack events'}" if now else "unknown"
        raise CliError(
            f"Deleting {name} did not finish ({state}).",
            hint="Look at the stack events in the CloudFormation console, fix the cause, rerun teardown.",
        ) from exc
    return f"{name}: deleted"


def delete_images(*, ecr: Any, refs: set[ImageRef]) -> list[str]:
    """Delete asset images by tag; images or repositories already gone are reported, not errors."""
    messages: list[str] = []
    by_repo: dict[str, list[str]] = {}
    for ref in sorted(refs):
        by_repo.setdefault(ref.repository, []).append(ref.tag)
    for repo, tags in by_repo.items():
        try:
            resp = ecr.batch_delete_image(repositoryName=repo, imageIds=[{"imageTag": t} for t in tags])
        except ClientError as exc:
            if is_client_error(exc, "RepositoryNotFoundException"):
                messages.append(f"{repo}: repository not found, nothing to delete")
                continue
            raise
        gone = sum(1 for f in resp.get("failures", []) if f.get("failureCode") == "ImageNotFound")
        other = [f for f in resp.get("failures", []) if f.get("failureCode") != "ImageNotFound"]
        if other:
            raise CliError(
                f"Could not delete image {other[0].get('imageId')} in {repo}: {other[0].get('failureReason')}"
            )
        messages.append(f"{repo}: {len(tags) - gone} image(s) deleted, {gone} already gone")
    return messages


def plan_teardown(
    *,
    target: AwsTarget,
    delete_order: Sequence[str],
    empty_buckets_of: Sequence[str],
    app_stacks: Sequence[str],
    with_images: bool,
    remove_buckets: bool = False,
    log_groups: Sequence[str] = (),
) -> TeardownPlan:
    """Look at what exists before deleting anything (also finds the images while templates exist).

    ``log_groups``: exact names, or prefixes ending in ``*``; those that exist join the plan.
    """
    cfn = target.client("cloudformation")
    plan = TeardownPlan(stacks=[(name, get_stack(cfn, name)) for name in delete_order],
                        remove_buckets=remove_buckets)
    for pattern in log_groups:
        plan.log_groups += find_log_groups(logs=target.client("logs"), pattern=pattern)
    for name, stack in plan.stacks:
        if stack is not None and name in empty_buckets_of:
            plan.buckets[name] = stack_buckets(cfn=cfn, stack=stack)
    if with_images:
        account = caller_identity(target)["account"]
        for name in plan.existing:
            plan.images |= stack_image_refs(cfn=cfn, stack_name=name, account=account, region=target.region)
        for name in (s for s in app_stacks if s not in delete_order):
            plan.images -= stack_image_refs(cfn=cfn, stack_name=name, account=account, region=target.region)
    return plan


def render_plan(plan: TeardownPlan, *, with_images: bool) -> None:
    """Show what will be deleted (and what is already gone)."""
    table = Table(title="Teardown plan", title_justify="left")
    for column in ("Stack", "Current status", "Action"):
        table.add_column(column, overflow="fold")
    for name, stack in plan.stacks:
        if stack is None:
            table.add_row(name, "[dim]not deployed[/]", "skip")
            continue
        action = "delete"
        if plan.buckets.get(name):
            action = "empty " + ", ".join(f"s3://{b}" for b in plan.buckets[name]) + ", then delete"
            action += " (buckets included)" if plan.remove_buckets else " (buckets kept)"
        table.add_row(name, str(stack["StackStatus"]), action)
    console = err_console()
    console.print(table)
    if with_images:
        images = ", ".join(f"{r.repository}:{r.tag[:12]}" for r in sorted(plan.images)) or "none found"
        console.print(f"ECR asset images to delete: {images}")
    if plan.log_groups:
        console.print(f"Log groups to delete: {', '.join(plan.log_groups)}", markup=False)


def run_teardown(
    *,
    target: AwsTarget,
    plan: TeardownPlan,
    confirm: Callable[[str], bool],
    timeout_s: float,
) -> list[str]:
    """Confirm, then empty buckets, delete stacks in the planned order, and delete images."""
    console = err_console()
    if not plan.existing and not plan.images and not plan.log_groups:
        message = "Nothing to tear down: " + ", ".join(n for n, _ in plan.stacks) + " not deployed."
        console.print(message, markup=False)
        return [message]
    question = f"Delete {', '.join(plan.existing) or 'nothing'}" + (
        f" and {len(plan.images)} image(s)" if plan.images else ""
    ) + f" in {target.region}?"
    if not confirm(question):
        raise CliError("Aborted: nothing was deleted.", hint="Pass --yes to skip the question.")
    cfn, s3 = target.client("cloudformation"), target.client("s3")
    done: list[str] = []
    for name, stack in plan.stacks:
        # RETAIN buckets do not block the stack's deletion; when they go too, that happens after.
        for bucket in plan.buckets.get(name, []) if stack and not plan.remove_buckets else []:
            count = empty_bucket(s3=s3, bucket=bucket)
            done.append(f"s3://{bucket}: emptied ({count} object version(s) deleted)")
            console.print(done[-1], markup=False)
        done.append(delete_stack(cfn=cfn, name=name, timeout_s=timeout_s))
        console.print(done[-1], markup=False)
    leftovers, failed = _leftovers(target=target, plan=plan)
    if plan.images:
        try:
            leftovers.extend(delete_images(ecr=target.client("ecr"), refs=plan.images))
        except (ClientError, CliError) as exc:
            failed.append(f"images: {exc}")
    for line in leftovers:
        console.print(line, markup=False)
    done.extend(leftovers)
    for line in failed:
        console.print(f"Could not delete {line}", markup=False)
    if failed:
        raise CliError(f"Teardown left {len(failed)} resource(s) behind (listed above).",
                       hint="Fix the cause (often a permission), then rerun the same teardown.")
    account = caller_identity(target)["account"]
    console.print("Asset images and files of earlier deploys stay in the CDK bootstrap's repository and bucket "
                  "(shared by every CDK app of this account and Region). To list those no deployed stack uses: "
                  f"{gc_command(account=account, region=target.region, profile=target.profile)} "
                  "(without --action=print it deletes them).", markup=False)
    return done
