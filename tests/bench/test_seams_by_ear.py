"""bench.seams_by_ear's summary: each seam's mean word error rate over every sentence and first
window it was cut at, beside the one-shot renders' mean over the same cuts (the design notes quote
these means)."""

from __future__ import annotations

import pytest

from bench.seams_by_ear import SEAMS, _means


def _cuts(firsts: list[int], rate_of: dict[str, float]) -> dict[str, float]:
    return {f"{first}/{opening}/{crossfade}": rate_of.get(f"{opening}/{crossfade}", 0.0)
            for first in firsts for opening, crossfade in SEAMS}


def test_a_seam_is_averaged_over_every_cut_and_one_shot_as_often_as_its_sentence_was_cut() -> None:
    found = [
        {"one_shot_wer": 0.0, "cuts_wer": _cuts([20, 30, 40], {"6/8": 0.6})},  # a short sentence, heard wrong
        {"one_shot_wer": 0.3, "cuts_wer": _cuts([20], {"6/8": 0.2, "20/8": 0.1})},  # cut once
    ]
    means = _means(found)
    assert set(means) == {"one_shot", *(f"{o}/{x}" for o, x in SEAMS)}
    assert means["6/8"] == pytest.approx((3 * 0.6 + 0.2) / 4)
    assert means["20/8"] == pytest.approx(0.1 / 4)
    assert means["20/4"] == 0.0
    assert means["one_shot"] == pytest.approx(0.3 / 4)  # the first sentence's 0 counts three times
