"""The one source of settings both CLIs and the CDK app share: stack names and cdk.json's context.

The values (model id, pinned model revision, endpoint name, ...) live in cdk.json, where a user
sees and edits them; this module reads them for everyone else. It imports nothing from aws_cdk,
so the CLIs can use it without loading the CDK. Two copies remain on purpose, each checked
against cdk.json by tests/infra/test_infra_shared_settings.py: the Kokoro container's pinned
revision (hub_weights.py; the image never sees this repository) and the agent's local default
model (the deployed agent is always given BEDROCK_MODEL_ID by the stack).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
CDK_JSON: Final = REPO_ROOT / "cdk.json"

STACK_FOUNDATION: Final = "KokoroTtsFoundation"
STACK_MODEL_CACHE: Final = "KokoroTtsModelCache"
STACK_ENDPOINT: Final = "KokoroTtsEndpoint"
STACK_AGENT: Final = "KokoroAgentRuntime"
"""Construct ids == CloudFormation stack names; the deploy CLIs rely on them."""
VARIANT_NAME: Final = "AllTraffic"
MODEL_REPO_ID: Final = "hexgrad/Kokoro-82M"
"""The Hugging Face repository the model cache mirrors (cli/model_sources.py); the Kokoro image
names it too (its torch engine), checked against this by tests/infra/test_infra_shared_settings.py."""

BOOTSTRAP_QUALIFIER_KEY: Final = "@aws-cdk/core:bootstrapQualifier"
"""The CDK's own context key. The synthesizer reads it (asset bucket, ECR repository, deploy roles),
infra reads it for the image-pull grants, the CLI for its bootstrap check: one place, cdk.json."""
DEFAULT_QUALIFIER: Final = "hnb659fds"
"""The CDK's default qualifier, used when cdk.json sets none."""

SHARED_KEYS: Final = (
    "instanceType", "engine", "endpointName", "minInstances", "maxInstances",
    "targetConcurrentRequestsPerInstance", "startupHealthCheckTimeoutSeconds",
    "modelRevision", "bedrockModelId", "agentRuntimeName", "firstAudioBudgetMs",
)

# Cross-Region inference profiles are named by geography; a Region belongs to one of them.
_GEO_OF_REGION: Final = (("us-", "us"), ("eu-", "eu"), ("ap-", "apac"))
_PROFILE_ID = re.compile(r"^(?P<geo>us|eu|apac|jp|au|ca|us-gov|global)\.(?P<model>.+)$")


@functools.cache
def cdk_context() -> MappingProxyType[str, Any]:
    """cdk.json's ``context`` block (defaults and feature flags), read once."""
    return MappingProxyType(dict(json.loads(CDK_JSON.read_text(encoding="utf-8")).get("context", {})))


def bootstrap_qualifier() -> str:
    """The qualifier the deploys use: cdk.json's ``@aws-cdk/core:bootstrapQualifier`` or CDK's default."""
    return str(cdk_context().get(BOOTSTRAP_QUALIFIER_KEY) or DEFAULT_QUALIFIER)


def shared_defaults() -> dict[str, Any]:
    """The deployment defaults, exactly as cdk.json states them."""
    context = cdk_context()
    missing = [key for key in SHARED_KEYS if key not in context]
    if missing:
        raise KeyError(f"cdk.json context lacks {', '.join(missing)}")
    return {key: context[key] for key in SHARED_KEYS}


def base_model_id(model_id: str) -> str:
    """The foundation model behind an id: ``us.anthropic.x`` -> ``anthropic.x``."""
    match = _PROFILE_ID.match(model_id)
    return match.group("model") if match else model_id


def profile_geo(region: str) -> str:
    """The inference-profile prefix for ``region`` ("us", "eu", "apac"); ValueError elsewhere."""
    for region_prefix, geo in _GEO_OF_REGION:
        if region.startswith(region_prefix):
            return geo
    raise ValueError(
        f"no cross-Region inference profile geography (us., eu., apac.) covers {region}; "
        "pass --bedrock-model-id with a model id or profile available there"
    )


def default_bedrock_model_id(region: str) -> str:
    """cdk.json's model, as the inference profile of ``region``'s geography."""
    return f"{profile_geo(region)}.{base_model_id(shared_defaults()['bedrockModelId'])}"


def check_profile_region(model_id: str, region: str) -> None:
    """Refuse a geography profile that cannot route from ``region`` (e.g. ``eu.`` in us-east-1)."""
    match = _PROFILE_ID.match(model_id)
    if match is None or match.group("geo") not in {geo for _, geo in _GEO_OF_REGION}:
        return  # a base model id, or a profile family (global, jp, ...) we do not map
    if profile_geo(region) != match.group("geo"):
        raise ValueError(
            f"{model_id} is a '{match.group('geo')}.' inference profile, which cannot be called "
            f"from {region}; use '{profile_geo(region)}.{match.group('model')}'"
        )
