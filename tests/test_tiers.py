"""The tiers tests/tiers.py gives are the markers pyproject.toml declares, and each test gets exactly one."""

from __future__ import annotations

import itertools
import subprocess
import sys
import tomllib
from pathlib import Path

from tiers import TIERS

ROOT = Path(__file__).resolve().parents[1]


def test_every_tier_is_a_declared_marker() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {line.split(":")[0] for line in declared} >= set(TIERS)


def test_no_test_is_in_two_tiers_or_in_none() -> None:
    """Collected with a marker expression for "in none, or in two": nothing is selected."""
    none = f"not ({' or '.join(TIERS)})"
    two = " or ".join(f"({a} and {b})" for a, b in itertools.combinations(TIERS, 2))
    args = [sys.executable, "-m", "pytest", "tests", "--ignore=tests/kokoro", "--collect-only", "-q",
            "-m", f"({none}) or {two}"]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False).stdout
    assert out.strip().splitlines()[-1].startswith("no tests collected"), out[-2000:]
