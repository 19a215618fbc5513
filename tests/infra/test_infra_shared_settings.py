"""One source for shared settings: cdk.json, read by infra/defaults.py for both CLIs and the app.

The two copies that cannot import it (the Kokoro image's pinned revision, the agent's local
default model) are checked against it here, so they cannot drift apart unnoticed.
"""

from __future__ import annotations

import re

import pytest

from cli import model_sources, options, stacks
from infra import defaults
from infra.config import DEFAULTS
from voice_agent.config import DEFAULT_MODEL_ID


def test_cli_and_app_read_the_same_defaults() -> None:
    shared = defaults.shared_defaults()
    assert dict(DEFAULTS) == shared
    assert options.DEFAULT_REVISION == model_sources.MODEL_REVISION == shared["modelRevision"]
    assert options.DEFAULT_INSTANCE_TYPE == shared["instanceType"]
    assert options.DEFAULT_ENDPOINT_NAME == shared["endpointName"]
    assert stacks.TTS_STACKS == (defaults.STACK_FOUNDATION, defaults.STACK_MODEL_CACHE, defaults.STACK_ENDPOINT)


def test_the_model_repository_is_named_once_for_the_tooling_and_checked_in_the_image() -> None:
    assert model_sources.MODEL_REPO_ID == defaults.MODEL_REPO_ID
    for copy in ("containers/kokoro/kokoro_server/engines/torch_engine.py",
                 "containers/kokoro/kokoro_tools/hub_weights.py"):
        text = (defaults.REPO_ROOT / copy).read_text()
        assert re.findall(r'^REPO_ID = "([^"]+)"', text, flags=re.MULTILINE) == [defaults.MODEL_REPO_ID], copy


def test_ci_names_stacks_through_the_cli_not_by_hand() -> None:
    """The workflow runs the CLIs' diff (stack names and deployed context from one place)."""
    workflow = (defaults.REPO_ROOT / ".github/workflows/cdk-diff.yml").read_text()
    for stack in (defaults.STACK_FOUNDATION, defaults.STACK_MODEL_CACHE, defaults.STACK_ENDPOINT,
                  defaults.STACK_AGENT):
        assert stack not in workflow, stack
    assert "deploy-tts diff --deployed" in workflow and "deploy-agent diff" in workflow
    assert 'node-version: "22"' in workflow


def test_copies_outside_the_tooling_match_cdk_json() -> None:
    hub = (defaults.REPO_ROOT / "containers/kokoro/kokoro_tools/hub_weights.py").read_text()
    (pinned,) = re.findall(r'^REVISION = "([0-9a-f]+)"', hub, flags=re.MULTILINE)
    assert pinned == defaults.shared_defaults()["modelRevision"]
    assert defaults.base_model_id(DEFAULT_MODEL_ID) == defaults.base_model_id(
        defaults.shared_defaults()["bedrockModelId"])


@pytest.mark.parametrize(("region", "geo"), [("us-east-1", "us"), ("us-west-2", "us"),
                                             ("eu-central-1", "eu"), ("ap-northeast-1", "apac")])
def test_the_inference_profile_follows_the_region(region: str, geo: str) -> None:
    model = defaults.default_bedrock_model_id(region)
    assert model == f"{geo}.anthropic.claude-haiku-4-5-20251001-v1:0"
    defaults.check_profile_region(model, region)


def test_regions_outside_the_profiles_get_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no cross-Region inference profile geography .* covers sa-east-1"):
        defaults.default_bedrock_model_id("sa-east-1")
    with pytest.raises(ValueError, match="cannot be called from eu-west-1; use 'eu.anthropic"):
        defaults.check_profile_region("us.anthropic.claude-haiku-4-5-20251001-v1:0", "eu-west-1")
    defaults.check_profile_region("amazon.nova-lite-v1:0", "sa-east-1")  # a base id: no geography
