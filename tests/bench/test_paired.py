"""bench.paired: variants parsed as written, every variant takes every pattern, stall pooled by audio."""

from __future__ import annotations

import pytest

from bench.paired import parse_variant, summarize, summarize_sentences, turns

VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "deadline": ("deadline", {}),
    "round_robin:variants=round_robin": ("round_robin", {"variants": "round_robin"}),
    "wait:PYTHONPATH=/tmp/w/containers/kokoro,ADMIT_MARGIN=0.5":
        ("wait", {"PYTHONPATH": "/tmp/w/containers/kokoro", "ADMIT_MARGIN": "0.5"}),
    "grace:KOKORO_FIRST_AUDIO_S=2,": ("grace", {"KOKORO_FIRST_AUDIO_S": "2"}),
}


@pytest.mark.parametrize("text,expected", VARIANTS.items(), ids=list(VARIANTS))
def test_a_variant_is_a_name_and_its_settings(text: str, expected: tuple[str, dict[str, str]]) -> None:
    assert parse_variant(text) == expected


@pytest.mark.parametrize("text,field", [("", "variant"), ("2x:A=1", "variant"), ("x:A", "variant x"),
                                        ("x:=1", "variant x")])
def test_a_bad_variant_is_refused_naming_it(text: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse_variant(text)


def test_every_variant_takes_every_pattern_and_none_always_goes_first() -> None:
    names = ["a", "b", "c"]
    orders = [turns(names, i) for i in range(6)]
    assert all(sorted(order) == names for order in orders)
    assert {order[0] for order in orders} == set(names)
    assert len({tuple(order) for order in orders}) > 1


def test_stall_is_pooled_by_audio_and_kept_per_pattern() -> None:
    runs = [
        {"variant": "a", "sessions": 4, "pattern": 0,
         "stall_ms_per_audio_min": 600.0, "audio_s": 60.0, "ttfa_p95_ms": 900.0},
        {"variant": "a", "sessions": 4, "pattern": 1,
         "stall_ms_per_audio_min": 0.0, "audio_s": 120.0, "ttfa_p95_ms": 1100.0},
        {"variant": "b", "sessions": 4, "pattern": 0,
         "stall_ms_per_audio_min": None, "audio_s": 0.0, "ttfa_p95_ms": None},
    ]
    assert summarize(runs) == [
        {"variant": "a", "sessions": 4, "patterns": [0, 1], "stall_ms_per_audio_min": 200.0,
         "stall_by_pattern": [600.0, 0.0], "ttfa_p95_ms_by_pattern": [900.0, 1100.0]},
        {"variant": "b", "sessions": 4, "patterns": [0], "stall_ms_per_audio_min": None,
         "stall_by_pattern": [None], "ttfa_p95_ms_by_pattern": [None]},
    ]


def test_sentence_ratios_are_paired_within_each_round() -> None:
    runs = [
        {"variant": "a", "round": 0, "short_ms": 100.0, "long_ms": 150.0, "ratio": 1.5},
        {"variant": "b", "round": 0, "short_ms": 100.0, "long_ms": 200.0, "ratio": 2.0},
        {"variant": "a", "round": 1, "short_ms": 300.0, "long_ms": 390.0, "ratio": 1.3},
        {"variant": "b", "round": 1, "short_ms": 300.0, "long_ms": 480.0, "ratio": 1.6},
        {"variant": "a", "round": 2, "short_ms": 200.0, "long_ms": 280.0, "ratio": 1.4},
        {"variant": "b", "round": 2, "short_ms": 200.0, "long_ms": None, "ratio": None},
    ]
    summary = {row["variant"]: row for row in summarize_sentences(runs)}
    assert list(summary) == ["a", "b"]
    assert summary["a"]["ratio"] == 1.4 and summary["a"]["rounds"] == 3
    assert summary["a"]["short_ms"] == 200.0 and summary["a"]["long_ms"] == 280.0
    assert summary["b"]["ratio"] == 1.8 and summary["b"]["ratio_by_round"] == [2.0, 1.6]
