"""Who can call the TTS endpoint: only a principal holding the invoke grant, and only on it.

Two halves, because neither can show it all offline:

1. moto, with IAM enforcement on (``set_initial_no_auth_action_count``): a principal without an
   invoke grant is refused ``sagemaker:InvokeEndpoint`` (403 AccessDenied) and one with a grant
   is let through, so the check is live, not assumed. moto's IAM evaluation does not support
   the Resource element for sagemaker-runtime (it checks every call against ``*``), so moto
   cannot show that the grant is scoped to one endpoint; and moto implements neither
   InvokeEndpointWithResponseStream (the CLI's ``say --mode stream``) nor the HTTP/2
   bidirectional stream, so the CLI's own calls cannot be replayed against it.
2. A small, honest policy evaluator over the synthesized templates (infra/baselines): explicit
   Deny wins, otherwise an explicit Allow whose Action and Resource patterns match, otherwise
   deny. It resolves Ref/Fn::Join/Fn::GetAtt/Fn::ImportValue to stand-ins, treats any statement
   with a Condition as a possible Allow (so "cannot" claims stay sound), and refuses to judge a
   role that attaches an AWS-managed policy it cannot read. Not shown offline: SCPs, permission
   boundaries, resource policies, session policies, and AWS's real evaluation of conditions.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import set_initial_no_auth_action_count

REPO = Path(__file__).resolve().parents[2]
ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"
ENDPOINT = "kokoro-tts"
ENDPOINT_ARN = f"arn:{PARTITION}:sagemaker:{REGION}:{ACCOUNT}:endpoint/{ENDPOINT}"
INVOKE_ACTIONS = ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream",
                  "sagemaker:InvokeEndpointWithBidirectionalStream"]


# ---- the evaluator ---------------------------------------------------------------------------


def resolve(node: Any, exports: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [resolve(n, exports) for n in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (key, value), = node.items()
        if key == "Ref":
            return {"AWS::Partition": PARTITION, "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}.get(
                value, f"${{{value}}}")
        if key == "Fn::Join":
            separator, parts = value
            return separator.join(str(resolve(p, exports)) for p in parts)
        if key == "Fn::GetAtt":
            return "${" + ".".join(value if isinstance(value, list) else [value]) + "}"
        if key == "Fn::ImportValue":
            return exports.get(str(resolve(value, exports)), f"${{import:{value}}}")
        if key == "Fn::Sub":
            text = value if isinstance(value, str) else value[0]
            return re.sub(r"\$\{AWS::(\w+)\}", lambda m: {"Partition": PARTITION, "Region": REGION,
                                                          "AccountId": ACCOUNT}.get(m.group(1), m.group(0)), text)
    return {k: resolve(v, exports) for k, v in node.items()}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(patterns: Any, value: str, *, case_sensitive: bool) -> bool:
    for pattern in _as_list(patterns):
        pattern = str(pattern)
        if case_sensitive:
            if fnmatch.fnmatchcase(value, pattern):
                return True
        elif fnmatch.fnmatchcase(value.lower(), pattern.lower()):
            return True
    return False


def decide(statements: list[dict[str, Any]], action: str, resource: str) -> str:
    """"Deny" (explicit), "Allow" (an explicit allow matches) or "ImplicitDeny"."""
    allowed = False
    for statement in statements:
        if "NotAction" in statement or "NotResource" in statement:
            action_ok = ("NotAction" in statement and not _matches(statement["NotAction"], action, case_sensitive=False)
                         ) or _matches(statement.get("Action", []), action, case_sensitive=False)
            resource_ok = ("NotResource" in statement
                           and not _matches(statement["NotResource"], resource, case_sensitive=True)
                           ) or _matches(statement.get("Resource", []), resource, case_sensitive=True)
        else:
            action_ok = _matches(statement.get("Action", []), action, case_sensitive=False)
            resource_ok = _matches(statement.get("Resource", []), resource, case_sensitive=True)
        if not (action_ok and resource_ok):
            continue
        if statement["Effect"] == "Deny" and "Condition" not in statement:
            return "Deny"
        if statement["Effect"] == "Allow":
            allowed = True  # with a Condition: possibly allowed, counted as allowed
    return "Allow" if allowed else "ImplicitDeny"


class Templates:
    """Every role in the synthesized templates with every statement that applies to it."""

    def __init__(self, paths: list[Path]) -> None:
        self.templates = {p.stem: json.loads(p.read_text()) for p in paths}
        exports: dict[str, str] = {}
        for template in self.templates.values():
            for output in template.get("Outputs", {}).values():
                if "Export" in output:
                    exports[str(resolve(output["Export"]["Name"], {}))] = str(resolve(output["Value"], {}))
        self.exports = exports
        self.roles: dict[str, list[dict[str, Any]]] = {}
        self.aws_managed: dict[str, list[str]] = {}
        managed: dict[str, list[dict[str, Any]]] = {}
        for template in self.templates.values():
            for logical, res in template["Resources"].items():
                props = resolve(res.get("Properties", {}), exports)
                if res["Type"] == "AWS::IAM::Role":
                    statements = [s for p in props.get("Policies", [])
                                  for s in _as_list(p["PolicyDocument"]["Statement"])]
                    self.roles[f"${{{logical}}}"] = statements
                    self.aws_managed[f"${{{logical}}}"] = [a for a in props.get("ManagedPolicyArns", [])
                                                           if isinstance(a, str) and ":iam::aws:policy/" in a]
                elif res["Type"] == "AWS::IAM::ManagedPolicy":
                    managed[f"${{{logical}}}"] = _as_list(props["PolicyDocument"]["Statement"])
        self.managed = managed
        for template in self.templates.values():  # attachments, after every role is known
            for logical, res in template["Resources"].items():
                props = resolve(res.get("Properties", {}), exports)
                if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                    for role in props.get("Roles", []):
                        self.roles.setdefault(str(role), []).extend(_as_list(props["PolicyDocument"]["Statement"]))
                if res["Type"] == "AWS::IAM::Role":
                    for arn in props.get("ManagedPolicyArns", []):
                        if str(arn) in managed:
                            self.roles[f"${{{logical}}}"].extend(managed[str(arn)])

    def role(self, fragment: str) -> tuple[str, list[dict[str, Any]]]:
        (found,) = [(name, s) for name, s in self.roles.items() if fragment in name]
        return found

    def can_invoke(self, statements: list[dict[str, Any]], resource: str = ENDPOINT_ARN) -> dict[str, str]:
        return {action: decide(statements, action, resource) for action in INVOKE_ACTIONS}


@pytest.fixture(scope="module")
def templates() -> Templates:
    return Templates(sorted((REPO / "infra/baselines").glob("*.json")))


def test_the_evaluator_follows_deny_allow_default() -> None:
    allow = {"Effect": "Allow", "Action": "sagemaker:Invoke*", "Resource": "arn:aws:sagemaker:*:*:endpoint/a"}
    deny = {"Effect": "Deny", "Action": "*", "Resource": "*"}
    assert decide([allow], "sagemaker:InvokeEndpoint", "arn:aws:sagemaker:r:1:endpoint/a") == "Allow"
    assert decide([allow], "sagemaker:InvokeEndpoint", "arn:aws:sagemaker:r:1:endpoint/b") == "ImplicitDeny"
    # actions ignore case
    assert decide([allow], "SageMaker:invokeendpoint", "arn:aws:sagemaker:r:1:endpoint/a") == "Allow"
    assert decide([allow, deny], "sagemaker:InvokeEndpoint", "arn:aws:sagemaker:r:1:endpoint/a") == "Deny"
    assert decide([], "sagemaker:InvokeEndpoint", "x") == "ImplicitDeny"
    not_s3 = {"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}
    assert decide([not_s3], "sagemaker:InvokeEndpoint", "x") == "Allow"


def test_the_invoke_policy_allows_exactly_the_one_endpoint(templates: Templates) -> None:
    ((name, statements),) = [(n, s) for n, s in templates.managed.items() if "InvokeEndpointPolicy" in n]
    assert set(templates.can_invoke(statements).values()) == {"Allow"}
    for other in (ENDPOINT_ARN.replace(ENDPOINT, "another-endpoint"), ENDPOINT_ARN.replace(ACCOUNT, "999999999999"),
                  ENDPOINT_ARN.replace(REGION, "eu-west-1"), ENDPOINT_ARN + "-2", "*"):
        assert set(templates.can_invoke(statements, other).values()) == {"ImplicitDeny"}, other
    assert decide(statements, "sagemaker:CreateEndpoint", ENDPOINT_ARN) == "ImplicitDeny"


def test_only_the_agent_role_may_invoke_and_no_role_without_the_grant_can(templates: Templates) -> None:
    for role, statements in templates.roles.items():
        assert templates.aws_managed.get(role, []) == [], f"{role} attaches AWS-managed policies this test cannot read"
        decisions = templates.can_invoke(statements)
        if "AgentRuntimeRole" in role:
            assert set(decisions.values()) == {"Allow"}, decisions  # it speaks through the endpoint
        else:
            assert set(decisions.values()) == {"ImplicitDeny"}, (role, decisions)
    _, execution = templates.role("SageMakerExecutionRole")
    assert set(templates.can_invoke(execution).values()) == {"ImplicitDeny"}


def test_every_grant_in_the_stacks_but_the_invoke_one_together_cannot_invoke(templates: Templates) -> None:
    """A principal holding every statement of every policy in the templates, less the invoke
    grant, still cannot call the endpoint: the invoke grant is the only way in."""
    everything = [s for statements in templates.roles.values() for s in statements]
    everything += [s for statements in templates.managed.values() for s in statements]
    without = [s for s in everything if not any(str(a).lower().startswith("sagemaker:invokeendpoint")
                                                 for a in _as_list(s.get("Action", [])))]
    assert len(without) < len(everything)
    assert set(templates.can_invoke(without).values()) == {"ImplicitDeny"}


# ---- moto, IAM enforced ----------------------------------------------------------------------


def _invoke_as(users: dict[str, dict[str, Any] | None]) -> dict[str, str]:
    """Set the users up unauthenticated (exactly that many calls), then invoke as each, enforced."""
    setup_calls = sum(4 if document is not None else 2 for document in users.values())
    return set_initial_no_auth_action_count(setup_calls)(mock_aws(_setup_and_invoke))(users)


def _setup_and_invoke(users: dict[str, dict[str, Any] | None]) -> dict[str, str]:
    iam = boto3.client("iam", region_name=REGION)
    results: dict[str, str] = {}
    keys = {}
    for user, document in users.items():
        iam.create_user(UserName=user)
        if document is not None:
            arn = iam.create_policy(PolicyName=f"{user}-policy", PolicyDocument=json.dumps(document))["Policy"]["Arn"]
            iam.attach_user_policy(UserName=user, PolicyArn=arn)
        keys[user] = iam.create_access_key(UserName=user)["AccessKey"]
    for user, key in keys.items():
        runtime = boto3.client("sagemaker-runtime", region_name=REGION, aws_access_key_id=key["AccessKeyId"],
                               aws_secret_access_key=key["SecretAccessKey"])
        try:
            runtime.invoke_endpoint(EndpointName=ENDPOINT, Body=b'{"text": "Hi."}', ContentType="application/json")
            results[user] = "allowed"
        except ClientError as error:
            results[user] = "denied" if error.response["ResponseMetadata"]["HTTPStatusCode"] == 403 else str(error)
    return results


def as_moto(statement: dict[str, Any]) -> dict[str, Any]:
    """A template statement moto accepts: no Condition, stand-in ARNs for unresolved attributes
    (``${Bucket.Arn}/x`` becomes ``arn:aws:s3:::bucket/x``)."""
    def arn(resource: str) -> str:
        return re.sub(r"\$\{(\w+)\.Arn\}", lambda m: f"arn:aws:s3:::{m.group(1).lower()}", resource)
    out = {k: v for k, v in statement.items() if k != "Condition"}
    out["Resource"] = [arn(str(r)) for r in _as_list(statement["Resource"])]
    return out


def test_moto_with_iam_enforced_refuses_a_principal_without_the_invoke_grant(templates: Templates) -> None:
    _, execution = templates.role("SageMakerExecutionRole")  # a real role of the stack, no invoke grant
    results = _invoke_as({
        "no-policy": None,
        "execution-role-grants": {"Version": "2012-10-17", "Statement": [as_moto(s) for s in execution]},
        "action-grant": {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": INVOKE_ACTIONS, "Resource": "*"}]},
    })
    assert results == {"no-policy": "denied", "execution-role-grants": "denied", "action-grant": "allowed"}
