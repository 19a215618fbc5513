"""bench.onnx_lanes on the real int8 weights: each case makes both its calls and is timed, so the
bench behind docs/design-notes.md's lanes figures runs (one round of a short sentence here; the
figures are the bench's, not this test's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from real_audio import packaged_dir

from bench import onnx_lanes
from bench.engine_vs_loop import SHORT

pytestmark = pytest.mark.kokoro


def test_every_case_is_timed_against_serial(tmp_path: Path) -> None:
    out = tmp_path / "lanes.json"
    args = ["--model-dir", str(packaged_dir()), "--rounds", "1", "--text", SHORT, "--out", str(out)]
    assert onnx_lanes.main(args) == 0
    result = json.loads(out.read_text())
    assert set(result["median"]) == set(onnx_lanes.CASES)
    for case, figures in result["median"].items():
        assert figures["wall_s"] > 0 and figures["cpu_s"] > 0, case
    assert result["over_serial"]["serial"] == {"wall_s": 1.0, "cpu_s": 1.0}
    assert all(len(rows) == 1 for rows in result["runs"].values())
