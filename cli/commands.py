"""Steps that the `deploy-tts` and `deploy-agent` commands share, so each command states only
what differs (its stacks, its context); option declarations live in cli/options.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import typer

from cli.aws import AwsTarget, CliError, caller_identity, make_target
from cli.teardown import plan_teardown, render_plan, run_teardown


def command_app(*, name: str, help: str) -> typer.Typer:
    """A `deploy-*` command group: help when called bare, errors printed by cli_errors, not typer."""
    return typer.Typer(name=name, help=help, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False)


def connect(*, region: str | None, profile: str | None) -> tuple[AwsTarget, dict[str, str]]:
    """The account to act on, checked first so a missing login is reported as such."""
    target = make_target(profile=profile, region=region)
    return target, caller_identity(target)


def confirm_or_abort(*, yes: bool, ask: Callable[[str], bool]) -> None:
    """Go on with ``--yes`` or a yes; otherwise stop with nothing done."""
    if not yes and not ask("Continue?"):
        raise CliError("Aborted: nothing was deployed.", hint="Pass --yes to skip the question.")


def teardown_stacks(
    *,
    target: AwsTarget,
    delete_order: Sequence[str],
    empty_buckets_of: Sequence[str],
    app_stacks: Sequence[str],
    with_images: bool,
    yes: bool,
    ask: Callable[[str], bool],
    timeout_s: float,
    remove_buckets: bool = False,
    log_groups: Sequence[str] = (),
) -> list[str]:
    """Plan the deletion, show the plan, then confirm (unless ``yes``) and carry it out."""
    plan = plan_teardown(target=target, delete_order=delete_order, empty_buckets_of=empty_buckets_of,
                         app_stacks=app_stacks, with_images=with_images, remove_buckets=remove_buckets,
                         log_groups=log_groups)
    render_plan(plan, with_images=with_images)
    return run_teardown(target=target, plan=plan, confirm=(lambda _q: True) if yes else ask, timeout_s=timeout_s)
