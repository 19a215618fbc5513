"""bench.memory_trim: each ratio default / trim after 1 s paired within its round, and the docs' table."""

from __future__ import annotations

from typing import Any

from bench.memory_trim import CASES, VARIANTS, summarize, table


def _answer(first: float, total: float, cpu: float, faults: int) -> dict[str, Any]:
    return {"first_s": first, "total_s": total, "cpu_s": cpu, "faults": faults, "rss_mib": 1000.0 + faults / 1000}


def test_ratios_pair_the_rounds_and_the_table_shows_both_servers() -> None:
    runs = {f"{variant}_{case}": [_answer(0.2, 0.2, 0.4, 10)] * 3 for case in CASES for variant in VARIANTS}
    # round 2 ran on a host twice as slow for both: its pair still reads 0.9
    runs["trim_1s_long"] = [_answer(0.4, 1.0, 2.0, 40_000), _answer(0.8, 2.0, 4.0, 41_000),
                            _answer(0.4, 1.0, 2.0, 39_000)]
    runs["default_long"] = [_answer(0.36, 0.9, 1.8, 9_000), _answer(0.72, 1.8, 3.6, 0),
                            _answer(0.4, 1.0, 2.0, 8_000)]
    found = summarize(runs)
    assert found["ratios"]["long_total_s"] == 0.9  # 0.9, 0.9, 1.0
    assert found["ratios"]["long_cpu_s"] == 0.9 and found["ratios"]["short_first_s"] == 1.0
    assert found["rows"]["long"]["default"]["faults"] == 8_000 and found["rounds"] == 3
    record = {**found, "when": "2026-12-07 19:00 UTC", "command": "python -m bench.memory_trim",
              "model_dir": "bench-tiny", "voice": "af_heart", "turn_gap_s": 1.5, "cpus": 2, "seconds": 90.0}
    lines = table(record)
    assert lines[3] == ("| 35 words | 0.400 / 1.000 / 2.000, 40000, 1040 | 0.400 / 1.000 / 2.000, 8000, 1008 "
                        "| 0.900 | 0.900 | 0.900 |")
