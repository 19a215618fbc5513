"""The settings `deploy-tts` deploys and diffs with: the deployed ones, changed only by flags.

The Endpoint stack's DeployContext output records the settings of the last deploy. It is the
baseline: a second deploy without flags deploys the same templates, and a flag changes that one
setting. Before anything is applied the plan lists every setting with where it comes from and
what changes. With nothing deployed, cdk.json's defaults are the baseline. Every value is
validated with the rules synthesis applies (infra/config.py), before any prompt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from cli.aws import AwsTarget, CliError, get_stack, stack_outputs
from cli.aws_checks import check_endpoint_quota
from cli.cdk import ToolCheck
from cli.stacks import ENDPOINT_STACK
from infra.config import ALARM_EMAIL_KEY, DEFAULTS, DEPLOY_CONTEXT_KEYS, ConfigError, Settings

Context = dict[str, str | int | None]

FLAGS: Final = {"instanceType": "--instance-type", "engine": "--engine", "endpointName": "--endpoint-name",
                "minInstances": "--min-instances", "maxInstances": "--max-instances",
                "modelRevision": "--model-revision", ALARM_EMAIL_KEY: "--alarm-email"}
"""Context key -> the flag that sets it (DEPLOY_CONTEXT_KEYS, in that order)."""


@dataclass(frozen=True, kw_only=True)
class SettingsPlan:
    """The context to deploy, the baseline it starts from, and where each value comes from."""

    context: Context
    baseline: Context
    deployed: bool
    flags: Context = field(default_factory=dict)

    def source(self, key: str) -> str:
        if key in self.flags:
            return FLAGS[key]
        return "deployed" if self.deployed else "cdk.json" if key in DEFAULTS else "not set"

    def changes(self) -> list[str]:
        """``key old -> new (flag)`` for each setting a flag changes from the baseline."""
        return [f"{key} {_shown(self.baseline.get(key))} -> {_shown(self.context.get(key))} ({FLAGS[key]})"
                for key in DEPLOY_CONTEXT_KEYS if self.context.get(key) != self.baseline.get(key)]

    def lines(self) -> list[str]:
        """What the plan prints: every setting with its source, then the changes."""
        rows = [f"  {key:<14}{_shown(self.context.get(key)):<44}({self.source(key)})" for key in DEPLOY_CONTEXT_KEYS]
        if not self.deployed:
            summary = f"first deploy of {ENDPOINT_STACK}: cdk.json's defaults, changed by the flags given"
        elif changes := self.changes():
            summary = "changes: " + "; ".join(changes)
        else:
            summary = "no setting changes: the deployed settings are kept"
        return ["Settings:", *rows, f"  {summary}"]


def flag_context(*, instance_type: str | None = None, engine: str | None = None, endpoint_name: str | None = None,
                 min_instances: int | None = None, max_instances: int | None = None,
                 model_revision: str | None = None, alarm_email: str | None = None) -> Context:
    """The settings the user gave as flags (absent ones are left out; ``--alarm-email ""``
    removes the address)."""
    given: Context = {"instanceType": instance_type, "engine": engine, "endpointName": endpoint_name,
                      "minInstances": min_instances, "maxInstances": max_instances,
                      "modelRevision": model_revision}
    flags: Context = {key: value for key, value in given.items() if value is not None}
    if alarm_email is not None:
        flags[ALARM_EMAIL_KEY] = alarm_email.strip() or None
    return flags


def check_flags(flags: Context) -> None:
    """Refuse a flag synthesis would refuse, before any AWS call or prompt."""
    _validate({**dict(DEFAULTS), **flags}, flags, deployed=False)


def plan_settings(flags: Context, deployed: Context | None) -> SettingsPlan:
    """The deployed settings (else cdk.json's), each flag given replacing one; validated."""
    baseline: Context = {key: DEFAULTS.get(key) for key in DEPLOY_CONTEXT_KEYS}
    if deployed is not None:
        baseline = {key: deployed.get(key) for key in DEPLOY_CONTEXT_KEYS}
    context = {**baseline, **flags}
    _validate(context, flags, deployed=deployed is not None)
    return SettingsPlan(context=context, baseline=baseline, deployed=deployed is not None, flags=flags)


def deployed_context(target: AwsTarget) -> Context | None:
    """The context the deployed Endpoint stack was synthesized with (its DeployContext output)."""
    raw = stack_outputs(get_stack(target.client("cloudformation"), ENDPOINT_STACK)).get("DeployContext")
    if not raw:
        return None
    loaded = json.loads(raw)
    return {str(k): v for k, v in loaded.items() if isinstance(v, str | int)}


def quota_check(target: AwsTarget, context: Mapping[str, str | int | None]) -> ToolCheck:
    """The instance quota against what the first deploy and every later update need."""
    return check_endpoint_quota(target=target, instance_type=str(context["instanceType"]),
                                min_instances=int(context["minInstances"] or DEFAULTS["minInstances"]),
                                max_instances=int(context["maxInstances"] or DEFAULTS["maxInstances"]))


def _validate(context: Mapping[str, str | int | None], flags: Context, *, deployed: bool) -> None:
    try:
        Settings.from_context(context.get)
    except ConfigError as error:
        if error.key not in FLAGS:
            raise CliError(str(error)) from None
        value = context.get(error.key)
        origin = "" if error.key in flags else " (deployed)" if deployed else " (cdk.json)"
        raise CliError(f"{FLAGS[error.key]} {_shown(value)}{origin}: {error.problem}.",
                       hint="Nothing was changed; fix the flag and run the command again.") from None


def _shown(value: str | int | None) -> str:
    return "(none)" if value is None or value == "" else str(value)
