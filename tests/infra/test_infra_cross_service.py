"""The cross-service table (infra/cross_service.py) against the synthesized templates.

Each row is evaluated against every identity and resource policy of the four templates with
infra/iam_eval.py; a row whose decision differs fails, and so does any Allow statement in the
templates that no allowed row accounts for. Two tests change a real template (a grant added, the
topic's CloudWatch Allow removed) to show the check catches exactly that.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from infra_support import Synthesized

from infra.cross_service import AWS_MANAGED_POLICIES, Arns, Call, calls
from infra.iam_eval import Policies, Request, as_list, decide, wildcard_match
from infra.template_policies import Env, TemplatePolicies

ENV = Env(account="111122223333", region="us-east-1")
ARNS = Arns(account=ENV.account, region=ENV.region)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "infrastructure.md"


def _principal(found: TemplatePolicies, caller: str) -> str:
    kind, _, name = caller.partition(":")
    if kind == "service":
        return name
    if kind == "role":
        return found.arn(*found.find(name, "AWS::IAM::Role"))
    if kind == "policy":
        return found.arn(*found.find(name, "AWS::IAM::ManagedPolicy"))
    raise AssertionError(f"no principal for {caller}")


def _decision(found: TemplatePolicies, policies: Policies, call: Call) -> str:
    context = {key: found.fill(value) for key, value in call.context.items()}
    if call.caller.startswith("aws-managed:"):
        document = AWS_MANAGED_POLICIES[call.caller.partition(":")[2]]
        policies, principal = Policies(identity={"slr": document["Statement"]}, resource=()), "slr"
    else:
        principal = _principal(found, call.caller)
    return decide(policies, Request(principal=principal, action=call.action, resource=found.fill(call.resource),
                                    context=context))


def _wrong_rows(templates: dict[str, dict[str, Any]], synth: Synthesized) -> list[str]:
    found = TemplatePolicies(templates, ENV)
    policies = found.policies()
    return [f"{c.caller} {c.action} {c.resource} {dict(c.context)}: expected {c.expect}, got {got}"
            for c in calls(synth.built.settings, ARNS) if (got := _decision(found, policies, c)) != c.expect]


def _unaccounted(templates: dict[str, dict[str, Any]], synth: Synthesized) -> list[str]:
    """Allow statements of the templates (identity and resource) with no allowed row behind them."""
    found = TemplatePolicies(templates, ENV)
    policies = found.policies()
    callers = {_principal(found, c.caller): c.caller for c in calls(synth.built.settings, ARNS)
               if not c.caller.startswith("aws-managed:")}
    rows = [(c.caller, c.action, found.fill(c.resource)) for c in calls(synth.built.settings, ARNS)
            if c.expect == "allow"]
    grants: list[tuple[str, Mapping[str, Any]]] = [
        (callers.get(principal, principal), s) for principal, statements in policies.identity.items()
        for s in statements]
    for statement in policies.resource:
        named = statement["Principal"]
        for value in as_list(named.get("Service", []) if isinstance(named, dict) else []):
            grants.append((f"service:{value}", statement))
    missing = []
    for caller, statement in grants:
        if statement["Effect"] != "Allow":
            continue
        for action in as_list(statement["Action"]):
            for resource in as_list(statement["Resource"]):
                if not any(who == caller and wildcard_match(action, what, fold_case=True)
                           and wildcard_match(resource, where) for who, what, where in rows):
                    missing.append(f"{caller} may {action} on {resource}, and no row says why")
    return missing


@pytest.mark.parametrize("variant", ["default", "override"])
def test_every_row_gets_the_decision_the_table_states(variant: str, default_synth: Synthesized,
                                                      override_synth: Synthesized) -> None:
    synth = default_synth if variant == "default" else override_synth
    assert _wrong_rows(synth.templates, synth) == []


@pytest.mark.parametrize("variant", ["default", "override"])
def test_the_templates_allow_nothing_the_table_does_not_list(variant: str, default_synth: Synthesized,
                                                             override_synth: Synthesized) -> None:
    synth = default_synth if variant == "default" else override_synth
    assert _unaccounted(synth.templates, synth) == []


def test_alarm_mail_is_allowed_over_tls_only(default_synth: Synthesized) -> None:
    rows = [c for c in calls(default_synth.built.settings, ARNS) if c.action == "sns:Publish"]
    assert {c.expect for c in rows} == {"allow", "explicit-deny", "implicit-deny"}
    assert all(c.context["aws:SecureTransport"] == "false" for c in rows if c.expect == "explicit-deny")
    assert len([c for c in rows if c.expect == "allow"]) == 4  # every alarm


def test_a_grant_without_a_row_fails(default_synth: Synthesized) -> None:
    templates = copy.deepcopy(default_synth.templates)
    role = next(r for key, r in templates["KokoroTtsFoundation"]["Resources"].items()
                if key.startswith("AgentRuntimeRole"))
    role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Action": "aws-marketplace:Subscribe", "Resource": "*"})
    assert _unaccounted(templates, default_synth) == [
        "role:AgentRuntimeRole may aws-marketplace:Subscribe on *, and no row says why"]
    assert any("aws-marketplace:Subscribe" in line and "expected implicit-deny, got allow" in line
               for line in _wrong_rows(templates, default_synth))


def test_the_topic_policy_of_last_release_fails_the_table(default_synth: Synthesized) -> None:
    """enforce_ssl alone (the Deny, no CloudWatch Allow): every alarm mail row fails."""
    templates = copy.deepcopy(default_synth.templates)
    policy = next(r for r in templates["KokoroTtsEndpoint"]["Resources"].values()
                  if r["Type"] == "AWS::SNS::TopicPolicy")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    policy["Properties"]["PolicyDocument"]["Statement"] = [s for s in statements if s["Effect"] == "Deny"]
    wrong = _wrong_rows(templates, default_synth)
    assert len(wrong) == 4 and all("sns:Publish" in line and "got implicit-deny" in line for line in wrong)


def test_application_auto_scaling_acts_through_its_service_linked_role(default_synth: Synthesized) -> None:
    """The scaling rows are evaluated against AWS's managed policy: true only without a RoleARN."""
    targets = [r["Properties"] for r in default_synth.templates["KokoroTtsEndpoint"]["Resources"].values()
               if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"]
    assert len(targets) == 1 and "RoleARN" not in targets[0]


def test_docs_list_every_row_of_the_table(default_synth: Synthesized) -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Cross-service calls"):]
    section = section[:section.index("\n## ", 3)]
    for call in calls(default_synth.built.settings, ARNS):
        assert call.group in section, call.group
        assert re.search(rf"`{re.escape(call.action)}`", section), call.action
