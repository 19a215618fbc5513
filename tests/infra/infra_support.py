"""Shared helpers for the infrastructure tests (synthesis, intrinsic rendering, IAM grants)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra.app import KokoroApp, build_app  # noqa: E402  (after the jsii environment setting)
from infra.defaults import shared_defaults  # noqa: E402

MODEL_PREFIX = f"models/kokoro-82m/{shared_defaults()['modelRevision']}/"  # cdk.json pins the revision
STACK_NAMES = ("KokoroTtsFoundation", "KokoroTtsModelCache", "KokoroTtsEndpoint", "KokoroAgentRuntime")
CONCRETE_ENV: Mapping[str, str] = {"CDK_DEFAULT_ACCOUNT": "123456789012", "CDK_DEFAULT_REGION": "us-west-2"}
OVERRIDES: Mapping[str, Any] = {
    # Strings, as `cdk -c key=value` delivers them.
    "instanceType": "ml.m5.xlarge",
    "minInstances": "2",
    "maxInstances": "3",
    "firstAudioBudgetMs": "750",
}
# Anything that could let synthesis reach AWS or pick up a developer's account.
_SCRUBBED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
             "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "CDK_DEFAULT_ACCOUNT",
             "CDK_DEFAULT_REGION", "CDK_CONTEXT_JSON", "CDK_OUTDIR")


@dataclass(frozen=True, kw_only=True)
class Synthesized:
    """One synthesized cloud assembly, read back from disk."""

    built: KokoroApp
    outdir: Path
    error: str | None
    templates: dict[str, dict[str, Any]]
    assets: dict[str, dict[str, Any]]

    @property
    def validation_report(self) -> dict[str, Any]:
        path = self.outdir / "validation-report.json"
        return json.loads(path.read_text()) if path.exists() else {"pluginReports": []}


@contextmanager
def offline_environment(extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """No credentials, no profile, no instance metadata; ``extra`` variables set on top."""
    saved = {key: os.environ.pop(key) for key in _SCRUBBED if key in os.environ}
    added = {"AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
             "AWS_CONFIG_FILE": os.devnull, **(extra or {})}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)
        os.environ.update(saved)


def synthesize(outdir: Path, context: Mapping[str, Any] | None = None, *,
               environment: Mapping[str, str] | None = None) -> Synthesized:
    """Synthesize without credentials; a cdk-nag failure is recorded, not raised.

    ``environment`` (e.g. CDK_DEFAULT_ACCOUNT/REGION, as the CDK CLI sets them) makes the
    stacks environment-specific; otherwise they are environment-agnostic.
    """
    with offline_environment(environment):
        built = build_app(context, outdir=str(outdir), use_default_environment=environment is not None)
        error = None
        try:
            built.app.synth()
        except RuntimeError as exc:  # jsii surfaces ValidationFailed as RuntimeError
            error = str(exc)
    templates = {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in STACK_NAMES}
    assets = {name: json.loads((outdir / f"{name}.assets.json").read_text()) for name in STACK_NAMES}
    return Synthesized(built=built, outdir=outdir, error=error, templates=templates, assets=assets)


def render(value: Any) -> Any:
    """Flatten CloudFormation intrinsics into readable strings for exact comparisons:
    {"Ref": "AWS::Region"} -> "${AWS::Region}", Fn::Join -> concatenation,
    Fn::GetAtt -> "${Id.Attr}", Fn::ImportValue -> "${Import:Name}"."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return [render(item) for item in value]
    if isinstance(value, dict) and len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref":
            return f"${{{arg}}}"
        if key == "Fn::Join":
            return str(arg[0]).join(str(render(part)) for part in arg[1])
        if key == "Fn::GetAtt":
            return f"${{{arg[0]}.{arg[1]}}}"
        if key == "Fn::ImportValue":
            return f"${{Import:{arg}}}"
        if key == "Fn::Sub" and isinstance(arg, str):
            return arg
    if isinstance(value, dict):
        return {key: render(item) for key, item in value.items()}
    return value


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def grants(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    """action -> set of rendered resources, over Allow statements."""
    result: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        for action in as_list(statement["Action"]):
            result.setdefault(action, set()).update(str(r) for r in as_list(render(statement["Resource"])))
    return result


def role_statements(templates: Mapping[str, dict[str, Any]], stack: str, role_prefix: str) -> list[dict[str, Any]]:
    """Every Allow statement that reaches a role: its inline policies plus AWS::IAM::Policy
    resources in any stack that attach to it (directly or through a cross-stack import)."""
    resources = templates[stack]["Resources"]
    (logical_id,) = [key for key, res in resources.items()
                     if key.startswith(role_prefix) and res["Type"] == "AWS::IAM::Role"]
    statements = [s for policy in resources[logical_id]["Properties"].get("Policies", [])
                  for s in policy["PolicyDocument"]["Statement"]]
    for template in templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            roles = [str(render(role)) for role in resource["Properties"].get("Roles", [])]
            if any(role == f"${{{logical_id}}}" or f"Ref{logical_id}" in role for role in roles):
                statements.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return statements
