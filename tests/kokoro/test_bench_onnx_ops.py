"""bench.onnx_ops on the real int8 weights: every operator the vocoder runs is timed on both
sessions and the shares add up, so the bench behind docs/design-notes.md's operator table runs
(one round of a short sentence here; the figures are the bench's, not this test's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_audio import one_round_on_a_short_sentence

from bench import onnx_ops

pytestmark = pytest.mark.kokoro


def test_every_operator_is_timed_on_one_thread_and_on_all_cores(tmp_path: Path) -> None:
    result = one_round_on_a_short_sentence(onnx_ops.main, tmp_path / "ops.json")
    ops = {row["op"]: row for row in result["ops"]}
    assert {"ConvInteger", "Sin", "ConvTranspose", "STFT"} <= set(ops)  # the int8 iSTFTNet vocoder's
    assert all(ops[op]["one_thread_s"] > 0 and ops[op]["all_cores_s"] > 0 for op in ("ConvInteger", "Sin"))
    assert all(row["one_thread_s"] >= 0 and row["all_cores_s"] >= 0 for row in ops.values())  # a few round to 0
    assert sum(row["share"] for row in ops.values()) == pytest.approx(1.0, abs=0.01)
    assert [row["all_cores_s"] for row in result["ops"]] == sorted((row["all_cores_s"] for row in result["ops"]),
                                                                   reverse=True)
    assert result["frames"] > 20 and all(len(walls) == 1 for walls in result["wall_s"].values())
