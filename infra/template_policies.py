"""Every identity and resource policy in a set of synthesized templates, as strings to evaluate.

CloudFormation resolves ``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub`` and ``Fn::ImportValue``
when it deploys; infra/iam_eval.py needs the strings. Resources the templates name (alarms, the
topic, log groups) get those names; resources CloudFormation names itself (buckets, roles,
managed policies) get a stand-in, ``<stack>-<logical id>`` in lower case, which
:meth:`TemplatePolicies.physical_name` reports so a test can address them. An intrinsic or a
resource type met inside a policy and not handled here raises, rather than being guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from infra.iam_eval import Policies, Statement, UnsupportedPolicy, as_list

_NAME_PROPERTY: Final = {
    "AWS::S3::Bucket": "BucketName", "AWS::IAM::Role": "RoleName", "AWS::SNS::Topic": "TopicName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName", "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::Logs::LogGroup": "LogGroupName",
}
_SUB_TOKEN = re.compile(r"\$\{([^}]+)\}")
_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z][A-Za-z0-9]*)\}")


@dataclass(frozen=True, kw_only=True)
class Env:
    """The account and Region the evaluation pretends the stacks are deployed to."""

    account: str
    region: str
    partition: str = "aws"


class TemplatePolicies:
    """The policies of ``templates`` (stack name -> template) with intrinsics resolved for ``env``."""

    def __init__(self, templates: Mapping[str, Mapping[str, Any]], env: Env) -> None:
        self.templates = templates
        self.env = env

    # --- names and ARNs ---------------------------------------------------------------------

    def find(self, logical_prefix: str, resource_type: str) -> tuple[str, str]:
        """(stack, logical id) of the one resource of ``resource_type`` whose id starts so."""
        found = [(stack, key) for stack, template in self.templates.items()
                 for key, resource in template.get("Resources", {}).items()
                 if key.startswith(logical_prefix) and resource["Type"] == resource_type]
        if len(found) != 1:
            raise KeyError(f"{len(found)} {resource_type} resources start with {logical_prefix!r}")
        return found[0]

    def fill(self, text: str) -> str:
        """``text`` with each ``{<logical id prefix>}`` replaced by that resource's physical name."""
        def name(match: re.Match[str]) -> str:
            found = [(stack, key) for stack, template in self.templates.items()
                     for key, resource in template.get("Resources", {}).items()
                     if key.startswith(match.group(1)) and resource["Type"] in _NAME_PROPERTY]
            if len(found) != 1:
                raise KeyError(f"{len(found)} named resources start with {match.group(1)!r}")
            return self.physical_name(*found[0])
        return _PLACEHOLDER.sub(name, text)

    def physical_name(self, stack: str, logical_id: str) -> str:
        resource = self.templates[stack]["Resources"][logical_id]
        prop = _NAME_PROPERTY.get(resource["Type"])
        if prop is None:
            raise UnsupportedPolicy(f"no name rule for {resource['Type']} ({logical_id})")
        name = resource.get("Properties", {}).get(prop)
        return str(self.resolve(stack, name)) if name is not None else f"{stack}-{logical_id}".lower()

    def arn(self, stack: str, logical_id: str) -> str:
        """What ``Fn::GetAtt [id, Arn]`` (or a topic's or managed policy's ``Ref``) becomes."""
        kind = self.templates[stack]["Resources"][logical_id]["Type"]
        name, env = self.physical_name(stack, logical_id), self.env
        regional = f"arn:{env.partition}:{{}}:{env.region}:{env.account}:"
        arns = {
            "AWS::IAM::Role": f"arn:{env.partition}:iam::{env.account}:role/{name}",
            "AWS::IAM::ManagedPolicy": f"arn:{env.partition}:iam::{env.account}:policy/{name}",
            "AWS::S3::Bucket": f"arn:{env.partition}:s3:::{name}",
            "AWS::SNS::Topic": regional.format("sns") + name,
            "AWS::CloudWatch::Alarm": regional.format("cloudwatch") + f"alarm:{name}",
            "AWS::Logs::LogGroup": regional.format("logs") + f"log-group:{name}:*",
        }
        if kind not in arns:
            raise UnsupportedPolicy(f"no ARN rule for {kind} ({logical_id})")
        return arns[kind]

    # --- intrinsic functions ----------------------------------------------------------------

    def resolve(self, stack: str, value: Any) -> Any:
        """``value`` with every intrinsic of it replaced by the string CloudFormation would put."""
        if isinstance(value, list):
            return [self.resolve(stack, item) for item in value]
        if not isinstance(value, Mapping):
            return value
        if len(value) != 1 or not next(iter(value)).startswith(("Ref", "Fn::")):
            return {key: self.resolve(stack, item) for key, item in value.items()}
        (function, argument), = value.items()
        if function == "Ref":
            return self._ref(stack, str(argument))
        if function == "Fn::GetAtt" and argument[1] == "Arn":
            return self.arn(stack, str(argument[0]))
        if function == "Fn::Join":
            return str(argument[0]).join(str(self.resolve(stack, part)) for part in argument[1])
        if function == "Fn::Sub" and isinstance(argument, str):
            return _SUB_TOKEN.sub(lambda m: str(self._ref(stack, m.group(1))), argument)
        if function == "Fn::ImportValue":
            return self._import(str(self.resolve(stack, argument)))
        raise UnsupportedPolicy(f"intrinsic {function} {argument!r}")

    def _ref(self, stack: str, name: str) -> Any:
        env = self.env
        pseudo = {"AWS::AccountId": env.account, "AWS::Region": env.region, "AWS::Partition": env.partition,
                  "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": stack}
        if name in pseudo:
            return pseudo[name]
        resource = self.templates[stack]["Resources"].get(name)
        if resource is None:
            raise UnsupportedPolicy(f"Ref to {name}, not a resource of {stack}")
        if resource["Type"] in ("AWS::SNS::Topic", "AWS::IAM::ManagedPolicy"):
            return self.arn(stack, name)
        return self.physical_name(stack, name)

    def _import(self, export: str) -> Any:
        for stack, template in self.templates.items():
            for output in template.get("Outputs", {}).values():
                if self.resolve(stack, output.get("Export", {}).get("Name")) == export:
                    return self.resolve(stack, output["Value"])
        raise UnsupportedPolicy(f"no stack exports {export}")

    # --- policies ---------------------------------------------------------------------------

    def resources(self, *types: str) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
        """(stack, logical id, properties) of every resource of ``types``."""
        for stack, template in self.templates.items():
            for key, resource in template.get("Resources", {}).items():
                if resource["Type"] in types:
                    yield stack, key, resource.get("Properties", {})

    def identity(self) -> dict[str, list[Statement]]:
        """Principal -> its identity statements. Roles by ARN (inline, attached managed policies
        and AWS::IAM::Policy resources); a managed policy no role of ours attaches (CI's, the
        invoke policy) by its own ARN, standing for whoever you attach it to."""
        by_name: dict[str, str] = {}
        found: dict[str, list[Statement]] = {}
        for stack, key, props in self.resources("AWS::IAM::Role"):
            arn = self.arn(stack, key)
            by_name[self.physical_name(stack, key)] = arn
            found[arn] = [s for p in props.get("Policies", []) for s in _statements(self.resolve(stack, p))]
        attached: set[str] = set()
        for stack, key, props in self.resources("AWS::IAM::Role"):
            for policy_arn in as_list(self.resolve(stack, props.get("ManagedPolicyArns", []))):
                found[self.arn(stack, key)] += self._managed(policy_arn)
                attached.add(policy_arn)
        for stack, _, props in self.resources("AWS::IAM::Policy"):
            statements = _statements(self.resolve(stack, props))
            for role in as_list(self.resolve(stack, props.get("Roles", []))):
                found[by_name[role]] += statements
        for stack, key, _ in self.resources("AWS::IAM::ManagedPolicy"):
            arn = self.arn(stack, key)
            if arn not in attached:
                found[arn] = self._managed(arn)
        return found

    def _managed(self, policy_arn: str) -> list[Statement]:
        for stack, key, props in self.resources("AWS::IAM::ManagedPolicy"):
            if self.arn(stack, key) == policy_arn:
                return _statements(self.resolve(stack, props))
        raise UnsupportedPolicy(f"managed policy {policy_arn} is not in the templates")

    def resource_statements(self) -> list[Statement]:
        """Topic policies, bucket policies, and role trust policies (Resource: the role's ARN)."""
        found: list[Statement] = []
        for stack, _, props in self.resources("AWS::SNS::TopicPolicy", "AWS::S3::BucketPolicy"):
            found += _statements(self.resolve(stack, props))
        for stack, key, props in self.resources("AWS::IAM::Role"):
            trust = self.resolve(stack, props["AssumeRolePolicyDocument"])
            found += [{**s, "Resource": self.arn(stack, key)} for s in as_list(trust["Statement"])]
        return found

    def policies(self) -> Policies:
        return Policies(identity=self.identity(), resource=self.resource_statements())


def _statements(props: Mapping[str, Any]) -> list[Statement]:
    return [dict(s) for s in as_list(props["PolicyDocument"]["Statement"])]
