"""How the hostile-input tests draw their examples (a settings profile of their own, not loaded
globally, so other hypothesis tests keep theirs).

By default ("kokoro-fuzz"): derandomized, the same examples on every run, so a test never fails
in CI by chance; every failure found is kept in its test as an explicit ``@example``.
``KOKORO_FUZZ_EXPLORE=1`` ("kokoro-fuzz-explore"): random examples, ten times as many, to hunt
for new failures (run it on its own, it takes long; ``KOKORO_FUZZ_EXPLORE=1 pytest
tests/kokoro/test_hardening_fuzz.py tests/kokoro/test_g2p_hostile.py``).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings

EXPLORE = os.environ.get("KOKORO_FUZZ_EXPLORE") == "1"
EXPLORE_FACTOR = 10

settings.register_profile("kokoro-fuzz", derandomize=True, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("kokoro-fuzz-explore", derandomize=False, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
PROFILE = "kokoro-fuzz-explore" if EXPLORE else "kokoro-fuzz"


def fuzz_settings(max_examples: int, **overrides: Any) -> settings:
    """The profile with ``max_examples`` (times EXPLORE_FACTOR when exploring)."""
    count = max_examples * EXPLORE_FACTOR if EXPLORE else max_examples
    return settings(settings.get_profile(PROFILE), max_examples=count, **overrides)
