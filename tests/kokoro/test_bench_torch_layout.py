"""bench.torch_layout on the tiny model: every variant decodes the same sentence to kokoro's audio
within float rounding, and the rows name what each rewrites (one round of a short sentence here;
the figures are the bench's, docs/throughput.md, not this test's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_audio import one_round_on_a_short_sentence

from bench import torch_layout

pytestmark = pytest.mark.kokoro


def test_every_variant_decodes_the_sentence_as_kokoro_to_float_rounding(tiny_model: Path, tmp_path: Path) -> None:
    result = one_round_on_a_short_sentence(torch_layout.main, tmp_path / "layout.json", tiny_model)
    rows = {row["variant"]: row for row in result["rows"]}
    assert list(rows) == list(torch_layout.VARIANTS)
    assert rows["kokoro"]["over_kokoro"] == 1.0 and rows["kokoro"]["error_db"] is None
    assert all(rows[v]["error_db"] > 80 and rows[v]["median_s"] > 0 for v in ("convolutions", "adain", "engine"))
    assert result["frames"] > 20 and all(len(s) == 1 for s in result["seconds"].values())
