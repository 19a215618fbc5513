"""The test suite's tiers: each test gets exactly one, so a developer can run the fast one on every
change (``make test-fast``) and CI runs them all (``make test``).

- ``unit``: no server process, no real model, no browser; the fast tier;
- ``live_server``: starts a real server (Kokoro, the agent, the SageMaker stand-in, moto) or a CDK
  synth;
- ``real_model``: runs a whole model: the real int8 weights, or kokoro's own torch ``KModel``;
- ``browser``: drives headless Chromium;
- ``soak``: long randomized or load runs (fuzzing, liveness, vanishing clients, the soak).

A test module may say its tier (``pytestmark = pytest.mark.real_model``); otherwise the tier comes
from what the test uses: the fixtures below, or the real-weights helper module.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

TIERS = ("unit", "live_server", "real_model", "browser", "soak")
BROWSER_FIXTURES = frozenset({"browser", "page_agent"})
LIVE_FIXTURES = frozenset({
    "server", "own_server", "kokoro_server", "stopping_server", "sagemaker_local", "strict", "slow_server",
    "faulty", "real_server", "live", "supervised", "fuzzer", "tts_url", "moto_url", "templates", "runtime",
    "standin_env", "multilingual_tts", "multilingual_agent", "quick_results", "english_only", "server_lines",
    "default_synth", "override_synth", "concrete_env_synth", "failing", "agent",
})
SOAK_MODULES = frozenset({
    "test_hardening_soak", "test_hardening_vanish", "test_hardening_fuzz", "test_hardening_fuzz_encode",
    "test_session_state_machine", "test_g2p_hostile",
})


def tier(item: pytest.Item) -> str:
    """The tier of one collected test."""
    marked = [name for name in TIERS if item.get_closest_marker(name) is not None]
    if marked:
        return marked[0]
    module = getattr(item, "module", None)
    name = getattr(module, "__name__", "").rsplit(".", 1)[-1]
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & BROWSER_FIXTURES:
        return "browser"
    if name in SOAK_MODULES:
        return "soak"
    if module is not None and "real_audio" in {getattr(v, "__name__", "") for v in vars(module).values()}:
        return "real_model"
    if fixtures & LIVE_FIXTURES:
        return "live_server"
    return "unit"


def mark_tiers(items: Iterable[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier(item)))
