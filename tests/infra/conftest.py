"""Session fixtures: each app variant is synthesized once (jsii start-up dominates test time)."""

from __future__ import annotations

import pytest
from infra_support import CONCRETE_ENV, OVERRIDES, Synthesized, synthesize


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def override_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("cdk-override"), OVERRIDES)


@pytest.fixture(scope="session")
def concrete_env_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """As under `cdk diff`/`cdk deploy`: account and Region known, so ARNs are literal."""
    return synthesize(tmp_path_factory.mktemp("cdk-env"), environment=CONCRETE_ENV)
