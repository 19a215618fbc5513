"""Walk every identity policy in a CloudFormation template and report wildcards.

Independent of cdk-nag on purpose: it reads the synthesized JSON, so it also sees policies that
an L2 construct adds behind our back, and its allow-list is short enough to review in a diff.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

STAR_RESOURCE_ALLOWED: Final[Mapping[str, str]] = {
    "ecr:GetAuthorizationToken": "registry-wide token call; no resource-level permissions",
    "cloudwatch:PutMetricData": "no resource type; scoped by a cloudwatch:namespace condition",
    "xray:PutTraceSegments": "no resource-level permissions (trace upload)",
    "xray:PutTelemetryRecords": "no resource-level permissions (daemon telemetry)",
    "xray:GetSamplingRules": "no resource-level permissions (sampling config read)",
    "xray:GetSamplingTargets": "no resource-level permissions (sampling config read)",
}
"""action -> why Resource "*" is unavoidable for it."""

REQUIRED_CONDITION_KEYS: Final[Mapping[str, str]] = {
    "cloudwatch:PutMetricData": "cloudwatch:namespace",
}
"""Allow-listed actions that are only acceptable together with this condition key."""

_POLICY_TYPES: Final = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One disallowed wildcard, located precisely enough to fix."""

    resource: str
    statement: str
    problem: str

    def __str__(self) -> str:
        return f"{self.resource} [{self.statement}]: {self.problem}"


def iter_policy_documents(template: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(location, PolicyDocument) for inline role/user/group policies and standalone policies."""
    for logical_id, resource in template.get("Resources", {}).items():
        kind = resource.get("Type", "")
        props = resource.get("Properties", {})
        if kind in _POLICY_TYPES:
            yield f"{logical_id} ({kind})", props.get("PolicyDocument", {})
        elif kind in ("AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group"):
            for policy in props.get("Policies", []):
                name = policy.get("PolicyName", "?")
                yield f"{logical_id}.Policies[{name}] ({kind})", policy.get("PolicyDocument", {})


def audit_template(template: Mapping[str, Any]) -> list[Finding]:
    """Every Allow statement: no '*' in any action, no NotAction/NotResource, and a bare '*'
    resource only for allow-listed actions (with their required condition)."""
    findings: list[Finding] = []
    for location, document in iter_policy_documents(template):
        statements = document.get("Statement", [])
        if isinstance(statements, Mapping):
            statements = [statements]
        for index, statement in enumerate(statements):
            label = str(statement.get("Sid", f"#{index}"))
            findings.extend(
                Finding(resource=location, statement=label, problem=problem)
                for problem in _statement_problems(statement)
            )
    return findings


def _statement_problems(statement: Mapping[str, Any]) -> Iterator[str]:
    if statement.get("Effect") != "Allow":
        return
    for key in ("NotAction", "NotResource"):
        if key in statement:
            yield f"{key} grants everything except a list; use explicit Action/Resource"
    actions = _as_list(statement.get("Action", []))
    for action in actions:
        if not isinstance(action, str) or "*" in action:
            yield f"wildcard or non-literal action {action!r}"
    if "*" not in _as_list(statement.get("Resource", [])):
        return
    for action in actions:
        if action not in STAR_RESOURCE_ALLOWED:
            yield f"Resource '*' for {action!r}, which is not in the allow-list"
        required = REQUIRED_CONDITION_KEYS.get(action)
        if required and not _has_condition_key(statement, required):
            yield f"Resource '*' for {action!r} requires a {required} condition"


def _has_condition_key(statement: Mapping[str, Any], key: str) -> bool:
    conditions = statement.get("Condition", {})
    return any(key in block for block in conditions.values() if isinstance(block, Mapping))


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]
