"""A small IAM request evaluator: exactly the policy features our templates use, explicit Deny first.

Why our own: the PyPI candidates do not evaluate a request against policies with conditions
(policyuniverse, parliament, cloudsplaining and policy_sentry parse, lint or write policies;
policyglass computes effective permission sets with conditions left opaque; iam-ape computes
effective permissions from an account's authorization details); principalmapper 1.1.5 does, but
does not import on Python 3.10+ (``from collections import Mapping``), is AGPL-3.0, and compares
an SNS resource-policy action with itself (``item_parts = action.split(':')``).

Covered, and nothing else (anything else raises :class:`UnsupportedPolicy`, so a template that
starts using it fails its test instead of being evaluated by a guess):

- ``Effect`` Allow/Deny; ``Action``/``NotAction`` and ``Resource``/``NotResource`` with ``*`` and
  ``?`` (actions case-insensitive, resources case-sensitive); no ``Resource`` means every resource;
- ``Principal`` ``"*"``, ``{"AWS": "*"}`` (the same thing), ``{"AWS": <role ARN>}``,
  ``{"Service": <name>}``;
- condition operators StringEquals, StringLike, ArnEquals, ArnLike (six ARN parts, each a
  pattern), Bool, NumericLessThan; a list of policy values matches when any matches; a key the
  request lacks makes the operator false (AWS's rule for these non-negated operators).

Decision, for one account: an applicable Deny in any identity or resource policy wins; else an
applicable Allow in the caller's identity policies or in a resource policy naming the caller
allows; else the request is implicitly denied. Permission boundaries, SCPs and session policies
are not modelled: the stacks create none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Decision = Literal["allow", "explicit-deny", "implicit-deny"]
Statement = Mapping[str, Any]

OPERATORS: Final = ("StringEquals", "StringLike", "ArnEquals", "ArnLike", "Bool", "NumericLessThan")


class UnsupportedPolicy(ValueError):
    """A policy uses a feature this evaluator does not model."""


@dataclass(frozen=True, kw_only=True)
class Request:
    """One call: who (a role ARN or a service principal name), what, on which resource."""

    principal: str
    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Policies:
    """identity: principal -> statements of its identity policies; resource: every resource
    policy's statements (a role's trust policy carries the role ARN as its Resource)."""

    identity: Mapping[str, Sequence[Statement]]
    resource: Sequence[Statement]


def decide(policies: Policies, request: Request) -> Decision:
    """Allow, explicit deny or implicit deny for ``request`` under ``policies``."""
    applicable = [s for s in policies.identity.get(request.principal, ()) if applies(s, request)]
    applicable += [s for s in policies.resource if names_principal(s, request.principal) and applies(s, request)]
    if any(_effect(s) == "Deny" for s in applicable):
        return "explicit-deny"
    if any(_effect(s) == "Allow" for s in applicable):
        return "allow"
    return "implicit-deny"


def applies(statement: Statement, request: Request) -> bool:
    """Action, resource and conditions of ``statement`` all match ``request`` (principal aside)."""
    return (_matches_any(statement, "Action", request.action, fold_case=True)
            and _matches_any(statement, "Resource", request.resource, fold_case=False)
            and conditions_hold(statement.get("Condition", {}), request.context))


def names_principal(statement: Statement, principal: str) -> bool:
    """Whether a resource-policy statement's Principal covers ``principal``."""
    if "NotPrincipal" in statement:
        raise UnsupportedPolicy("NotPrincipal")
    named = statement.get("Principal")
    if named == "*":
        return True
    if not isinstance(named, Mapping):
        raise UnsupportedPolicy(f"Principal {named!r}")
    for kind, values in named.items():
        if kind not in ("AWS", "Service"):
            raise UnsupportedPolicy(f"Principal type {kind}")
        for value in as_list(values):
            if kind == "AWS" and value.endswith(":root"):
                raise UnsupportedPolicy(f"account principal {value}")
            if (kind == "AWS" and value == "*") or value == principal:
                return True
    return False


def conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Mapping[str, str]) -> bool:
    """Every operator block holds, and within a block every key (AND of ANDs)."""
    folded = {key.lower(): value for key, value in context.items()}
    for operator, block in conditions.items():
        if operator not in OPERATORS:
            raise UnsupportedPolicy(f"condition operator {operator}")
        for key, wanted in block.items():
            actual = folded.get(key.lower())
            if actual is None or not any(_compare(operator, actual, str(_scalar(v))) for v in as_list(wanted)):
                return False
    return True


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def wildcard_match(pattern: str, value: str, *, fold_case: bool = False) -> bool:
    """IAM's ``*`` (any run of characters) and ``?`` (one character)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE if fold_case else 0) is not None


def _effect(statement: Statement) -> str:
    effect = statement.get("Effect")
    if effect not in ("Allow", "Deny"):
        raise UnsupportedPolicy(f"Effect {effect!r}")
    return str(effect)


def _matches_any(statement: Statement, element: str, value: str, *, fold_case: bool) -> bool:
    if element in statement and f"Not{element}" in statement:
        raise UnsupportedPolicy(f"both {element} and Not{element}")
    if f"Not{element}" in statement:
        return not any(wildcard_match(str(p), value, fold_case=fold_case)
                       for p in as_list(statement[f"Not{element}"]))
    if element not in statement:
        if element == "Action":
            raise UnsupportedPolicy("a statement without Action or NotAction")
        return True  # a trust policy: the statement belongs to the one resource it is attached to
    return any(wildcard_match(str(p), value, fold_case=fold_case) for p in as_list(statement[element]))


def _scalar(value: Any) -> Any:
    if isinstance(value, Mapping | list):
        raise UnsupportedPolicy(f"unresolved condition value {value!r}")
    return str(value).lower() if isinstance(value, bool) else value


def _compare(operator: str, actual: str, wanted: str) -> bool:
    if operator == "StringEquals":
        return actual == wanted
    if operator == "StringLike":
        return wildcard_match(wanted, actual)
    if operator in ("ArnEquals", "ArnLike"):
        got, want = actual.split(":", 5), wanted.split(":", 5)
        return len(got) == len(want) == 6 and all(wildcard_match(w, g) for w, g in zip(want, got, strict=True))
    if operator == "Bool":
        return actual.lower() == wanted.lower()
    return float(actual) < float(wanted)  # NumericLessThan
