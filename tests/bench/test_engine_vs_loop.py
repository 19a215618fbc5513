"""bench.engine_vs_loop: medians per side, the loops' derived rows, and each target judged on them."""

from __future__ import annotations

from typing import Any

from bench.engine_vs_loop import CONCURRENT, SECOND_CALLER_AFTER_S, summarize


def _run(first: float, total: float, cpu: float, audio: float = 10.0, **extra: Any) -> dict[str, Any]:
    return {"first_s": first, "total_s": total, "cpu_s": cpu, "audio_s": audio, **extra}


def _rounds(*values: dict[str, Any]) -> list[dict[str, Any]]:
    return list(values)


def test_targets_are_judged_on_medians_and_the_loops_serve_one_caller_at_a_time() -> None:
    callers = [_run(0.2, 4.0, 0.0) for _ in range(CONCURRENT)]
    runs = {
        "ours": _rounds(_run(0.3, 4.0, 5.0), _run(0.2, 3.0, 4.0), _run(9.0, 9.0, 9.0)),  # one noisy round
        "ours_sentence_jobs": _rounds(_run(0.3, 5.0, 5.0)),
        "loop_sentence": _rounds(_run(0.4, 4.0, 4.0)),
        "loop_chunk": _rounds(_run(1.0, 3.5, 4.0)),
        "ours_concurrent": _rounds({**_run(0.0, 15.0, 0.0), "callers": callers}),
        "ours_concurrent_sentence_jobs": _rounds({**_run(0.0, 20.0, 0.0), "callers": callers}),
        "ours_second_caller": _rounds({**_run(0.0, 4.0, 0.0), "callers": [_run(0.3, 4.0, 0), _run(0.25, 0.5, 0)]}),
        "ours_short": _rounds(_run(0.2, 0.4, 0.5, 1.0)),
        "ours_short_one_shot": _rounds(_run(0.25, 0.25, 0.5, 1.0)),
        "loop_short": _rounds(_run(0.3, 0.3, 0.5, 1.0)),
    }
    found = summarize(runs)
    assert found["rows"]["paragraph"]["ours"]["total_s"] == 4.0  # the median, not the noisy round
    assert found["rows"]["concurrent"]["loop_sentence_x4_s"] == 16.0
    # the second caller of a loop waits for the paragraph, then for its own first audio
    assert found["rows"]["second_caller"]["loop_chunk_first_s"] == round(3.5 - SECOND_CALLER_AFTER_S + 0.3, 4)
    targets = {t["ratio"]: t for t in found["targets"]}
    assert targets["total_over_loop_sentence"]["value"] == 1.0 and targets["total_over_loop_sentence"]["met"]
    assert targets["cpu_per_audio_over_loop_sentence"]["value"] == 1.25
    assert not targets["cpu_per_audio_over_loop_sentence"]["met"]
    assert targets["concurrent_wall_over_loop_sentence_x4"]["met"]  # 15 s against 16 s
    assert targets["first_over_loop_chunk"]["met"]  # 0.3 s against 1.0 s
    assert targets["short_first_over_one_shot"]["value"] == 0.8
    assert targets["total_over_loop_chunk"]["met"] is None  # reported, no target
    # what joining sentences buys, against the same engine with one job per sentence (no target)
    assert targets["total_over_sentence_jobs"]["value"] == 0.8 and targets["total_over_sentence_jobs"]["met"] is None
    assert targets["concurrent_wall_over_sentence_jobs"]["value"] == 0.75
