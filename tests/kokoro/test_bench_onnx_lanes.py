"""bench.onnx_lanes on the real int8 weights: each case makes both its calls and is timed, so the
bench behind docs/design-notes.md's lanes figures runs (one round of a short sentence here; the
figures are the bench's, not this test's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_audio import one_round_on_a_short_sentence

from bench import onnx_lanes

pytestmark = pytest.mark.kokoro


def test_every_case_is_timed_against_serial(tmp_path: Path) -> None:
    result = one_round_on_a_short_sentence(onnx_lanes.main, tmp_path / "lanes.json")
    assert set(result["median"]) == set(onnx_lanes.CASES)
    for case, figures in result["median"].items():
        assert figures["wall_s"] > 0 and figures["cpu_s"] > 0, case
    assert result["over_serial"]["serial"] == {"wall_s": 1.0, "cpu_s": 1.0}
    assert all(len(rows) == 1 for rows in result["runs"].values())
