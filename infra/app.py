"""The CDK app: four stacks, cdk-nag checks, context defaults from cdk.json.

``python -m infra.app`` synthesizes into cdk.out (``make synth``); the CDK CLI runs the same
module through cdk.json. Run directly, nothing reads cdk.json for us, so its context is loaded
here; under the CLI, CDK_CONTEXT_JSON (cdk.json + ``-c`` flags) takes precedence over it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import App, Environment

from infra import nag
from infra.agent_runtime import AgentRuntimeStack
from infra.config import ConfigError, Settings, check_key_spelling
from infra.defaults import cdk_context
from infra.foundation import FoundationStack
from infra.model_cache import ModelCacheStack
from infra.shared import STACK_AGENT, STACK_ENDPOINT, STACK_FOUNDATION, STACK_MODEL_CACHE
from infra.tts_endpoint import TtsEndpointStack


@dataclass(frozen=True, kw_only=True)
class KokoroApp:
    """The app and its stacks, so tests and the snapshot tool can reach each one."""

    app: App
    settings: Settings
    foundation: FoundationStack
    model_cache: ModelCacheStack
    endpoint: TtsEndpointStack
    agent: AgentRuntimeStack

    @property
    def stacks(self) -> tuple[FoundationStack, ModelCacheStack, TtsEndpointStack, AgentRuntimeStack]:
        return (self.foundation, self.model_cache, self.endpoint, self.agent)


def cdk_json_context() -> dict[str, Any]:
    """The ``context`` block of cdk.json (defaults and feature flags)."""
    return dict(cdk_context())


def build_app(context: Mapping[str, Any] | None = None, *, outdir: str | None = None,
              use_default_environment: bool = True) -> KokoroApp:
    """Build all four stacks; ``context`` overrides cdk.json (tests pass e.g. instanceType).

    ``use_default_environment=False`` keeps the stacks environment-agnostic even when
    CDK_DEFAULT_ACCOUNT/REGION are set, which the snapshot and tests need for stable output.
    """
    app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    check_key_spelling(app.node.get_all_context())
    settings = Settings.from_scope(app)
    env = Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT") if use_default_environment else None,
        region=os.environ.get("CDK_DEFAULT_REGION") if use_default_environment else None,
    )

    foundation = FoundationStack(app, STACK_FOUNDATION, settings=settings, env=env)
    model_cache = ModelCacheStack(app, STACK_MODEL_CACHE, settings=settings,
                                  reader_role=foundation.sagemaker_role, env=env)
    endpoint = TtsEndpointStack(app, STACK_ENDPOINT, settings=settings, env=env,
                                execution_role=foundation.sagemaker_role,
                                model_bucket=model_cache.bucket)
    agent = AgentRuntimeStack(app, STACK_AGENT, settings=settings, env=env,
                              execution_role_arn=foundation.agent_role.role_arn)
    # The deploy order the CLI uses, made explicit even where no reference implies it.
    model_cache.add_stack_dependency(foundation, "the model-read policy attaches to its role")
    endpoint.add_stack_dependency(model_cache, "the model reads the cache bucket")
    agent.add_stack_dependency(foundation, "the runtime assumes its role")

    built = KokoroApp(app=app, settings=settings, foundation=foundation,
                      model_cache=model_cache, endpoint=endpoint, agent=agent)
    nag.apply(built)
    return built


def _parse_context(pairs: Sequence[str]) -> dict[str, str]:
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"-c expects key=value, got {pair!r}")
        context[key] = value
    return context


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.app", description=__doc__)
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                        help="override a context value (repeatable), as with cdk -c")
    parser.add_argument("-o", "--output", default="cdk.out", help="cloud assembly directory")
    args = parser.parse_args(argv)
    # Under the CDK CLI, CDK_OUTDIR decides and a second outdir would conflict.
    outdir = None if os.environ.get("CDK_OUTDIR") else args.output
    try:
        built = build_app(_parse_context(args.context), outdir=outdir)
        built.app.synth()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
        print(f"error: cdk-nag findings are not acknowledged: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
