"""bench.engine_vs_loop: medians per side, the loops' derived rows, and each target judged on them."""

from __future__ import annotations

from typing import Any

from bench.engine_sides import CONCURRENT
from bench.engine_vs_loop import SECOND_CALLER_AFTER_S, summarize


def _run(first: float, total: float, cpu: float, audio: float = 10.0, **extra: Any) -> dict[str, Any]:
    return {"first_s": first, "total_s": total, "cpu_s": cpu, "audio_s": audio, **extra}


def _rounds(*values: dict[str, Any]) -> list[dict[str, Any]]:
    return list(values)


def test_rows_are_medians_and_targets_medians_of_each_rounds_ratio() -> None:
    callers = [_run(0.2, 4.0, 0.0) for _ in range(CONCURRENT)]

    def rounds(*found: dict[str, Any]) -> list[dict[str, Any]]:
        return list(found) if len(found) == 3 else list(found) * 3

    # round 2 ran on a host twice as slow: both of its sides took twice as long
    runs = {
        "ours": rounds(_run(0.3, 4.0, 5.0), _run(0.6, 8.0, 5.0), _run(0.3, 4.0, 5.0)),
        "ours_sentence_jobs": rounds(_run(0.3, 5.0, 5.0), _run(0.6, 10.0, 5.0), _run(0.3, 5.0, 5.0)),
        "ours_linear_pace": rounds(_run(0.3, 4.4, 5.0), _run(0.6, 8.8, 5.0), _run(0.3, 4.4, 5.0)),
        "loop_sentence": rounds(_run(0.4, 4.2, 4.0), _run(0.8, 8.4, 4.0), _run(0.4, 4.2, 4.0)),
        "loop_chunk": rounds(_run(1.0, 3.5, 4.0)),
        "ours_concurrent": rounds({**_run(0.0, 15.0, 0.0), "callers": callers}),
        "ours_concurrent_sentence_jobs": rounds({**_run(0.0, 20.0, 0.0), "callers": callers}),
        "ours_concurrent_linear_pace": rounds({**_run(0.0, 16.5, 0.0), "callers": callers}),
        "ours_second_caller": rounds({**_run(0.0, 4.0, 0.0), "callers": [_run(0.3, 4.0, 0), _run(0.25, 0.5, 0)]}),
        "ours_short": rounds(_run(0.2, 0.4, 0.5, 1.0)),
        "ours_short_one_shot": rounds(_run(0.25, 0.25, 0.5, 1.0)),
        "loop_short": rounds(_run(0.3, 0.3, 0.5, 1.0)),
    }
    found = summarize(runs)
    assert found["rows"]["paragraph"]["ours"]["total_s"] == 4.0  # the median, not the slow round
    assert found["rows"]["concurrent"]["loop_sentence_x4_s"] == 16.8
    # the second caller of a loop waits for the paragraph, then for its own first audio
    assert found["rows"]["second_caller"]["loop_chunk_first_s"] == round(3.5 - SECOND_CALLER_AFTER_S + 0.3, 4)
    targets = {t["ratio"]: t for t in found["targets"]}
    assert targets["total_over_loop_sentence"]["value"] == round(4.0 / 4.2, 3)  # every round's ratio alike
    assert targets["total_over_loop_sentence"]["met"]
    assert targets["cpu_per_audio_over_loop_sentence"]["value"] == 1.25
    assert not targets["cpu_per_audio_over_loop_sentence"]["met"]
    assert targets["concurrent_wall_over_loop_sentence_x4"]["met"]  # 15 s against 16.8 s
    assert targets["first_over_loop_chunk"]["met"]  # 0.3 s against 1.0 s
    assert targets["short_first_over_one_shot"]["value"] == 0.8
    assert targets["total_over_loop_chunk"]["met"] is None  # reported, no target
    # what joining sentences buys, against the same engine with one job per sentence (no target)
    assert targets["total_over_sentence_jobs"]["value"] == 0.8 and targets["total_over_sentence_jobs"]["met"] is None
    assert targets["concurrent_wall_over_sentence_jobs"]["value"] == 0.75
    # and what fitting the decoder's cost per call buys, against the warm-up pace alone
    assert targets["total_over_linear_pace"]["value"] == round(4.0 / 4.4, 3)
    assert targets["concurrent_wall_over_linear_pace"]["value"] == round(15.0 / 16.5, 3)
    assert found["rows"]["concurrent"]["ours_linear_pace_wall_s"] == 16.5


def test_a_round_where_one_side_stalled_does_not_pair_with_another_rounds_figure() -> None:
    """Round 3 ran on a host 1.5x slower; in round 2 ours stalled. The medians' ratio would pair
    ours' slow round 3 (6.0) with the loop's fast round 1 (4.0): 1.5, which neither side did.
    Each round's own ratio is 1.0, 2.25 and 1.0: the target reads 1.0."""
    same = [_run(0.3, 4.0, 5.0)] * 3
    concurrent = [{**_run(0.0, 16.0, 0.0), "callers": [_run(0.2, 4.0, 0.0)] * CONCURRENT}] * 3
    runs = {name: same for name in (
        "ours_sentence_jobs", "ours_linear_pace", "loop_chunk", "ours_short", "ours_short_one_shot", "loop_short")}
    runs |= {name: concurrent for name in (
        "ours_concurrent", "ours_concurrent_sentence_jobs", "ours_concurrent_linear_pace")}
    runs["ours_second_caller"] = [{**_run(0.0, 4.0, 0.0), "callers": [_run(0.3, 4.0, 0), _run(0.25, 0.5, 0)]}] * 3
    runs["ours"] = [_run(0.3, 4.0, 5.0), _run(0.3, 9.0, 5.0), _run(0.3, 6.0, 5.0)]
    runs["loop_sentence"] = [_run(0.3, 4.0, 5.0), _run(0.3, 4.0, 5.0), _run(0.3, 6.0, 5.0)]
    found = summarize(runs)
    assert found["rows"]["paragraph"]["ours"]["total_s"] / found["rows"]["paragraph"]["loop_sentence"]["total_s"] == 1.5
    assert {t["ratio"]: t["value"] for t in found["targets"]}["total_over_loop_sentence"] == 1.0


def _steady() -> dict[str, list[dict[str, Any]]]:
    """Three alike rounds of every side the engine bench ran before the short-answer rows."""
    same = [_run(0.3, 4.0, 5.0)] * 3
    concurrent = [{**_run(0.0, 16.0, 0.0), "callers": [_run(0.2, 4.0, 0.0)] * CONCURRENT}] * 3
    runs = {name: same for name in (
        "ours", "loop_sentence", "ours_sentence_jobs", "ours_linear_pace", "loop_chunk", "ours_short",
        "ours_short_one_shot", "loop_short")}
    runs |= {name: concurrent for name in (
        "ours_concurrent", "ours_concurrent_sentence_jobs", "ours_concurrent_linear_pace")}
    runs["ours_second_caller"] = [{**_run(0.0, 4.0, 0.0), "callers": [_run(0.3, 4.0, 0), _run(0.25, 0.5, 0)]}] * 3
    return runs


def test_a_short_answers_whole_cost_is_judged_against_the_loop_round_by_round() -> None:
    runs = _steady()
    # the 35-word sentence: ours speaks sooner but finishes later and spends more CPU; round 2 ran slow
    runs["ours_long"] = [_run(1.0, 4.6, 8.0), _run(2.0, 9.2, 16.0), _run(1.0, 4.6, 8.0)]
    runs["loop_long"] = [_run(4.0, 4.0, 7.0), _run(8.0, 8.0, 14.0), _run(4.0, 4.0, 7.0)]
    found = summarize(runs)
    assert found["rows"]["answers"]["long"]["ours"] == {"first_s": 1.0, "total_s": 4.6, "cpu_s": 8.0}
    targets = {t["ratio"]: t for t in found["targets"]}
    assert targets["long_first_over_loop"]["value"] == 0.25 and targets["long_first_over_loop"]["met"]
    assert targets["long_total_over_loop"]["value"] == 1.15 and not targets["long_total_over_loop"]["met"]
    assert targets["long_cpu_over_loop"]["value"] == round(8 / 7, 3) and not targets["long_cpu_over_loop"]["met"]
    assert targets["short_total_over_loop"]["value"] == 1.0 and targets["short_total_over_loop"]["met"]


def test_results_from_before_the_short_answer_rows_still_summarize() -> None:
    found = summarize(_steady())
    assert "long_total_over_loop" not in {t["ratio"] for t in found["targets"]}


def test_the_wide_seams_are_attributed_on_every_side_they_ran() -> None:
    """The paragraph, four at once and both answers against ours with the seam before the vocoder
    was cut from the decoder's body, each paired within its rounds; a results file without them
    summarizes as before (above)."""
    runs = _steady()
    runs["ours_long"] = [_run(0.5, 4.0, 7.0)] * 3
    runs["loop_long"] = [_run(4.0, 4.0, 7.0)] * 3
    runs["ours_wide_seams"] = [_run(0.3, 5.0, 5.0)] * 3
    runs["ours_concurrent_wide_seams"] = [{**_run(0.0, 20.0, 0.0), "callers": [_run(0.2, 5.0, 0.0)] * CONCURRENT,
                                           "decoded_per_heard": 1.1}] * 3
    runs["ours_long_wide_seams"] = [_run(1.0, 5.0, 8.0)] * 3
    found = summarize(runs)
    targets = {t["ratio"]: t for t in found["targets"]}
    assert targets["total_over_wide_seams"]["value"] == 0.8 and targets["total_over_wide_seams"]["met"] is None
    assert targets["concurrent_wall_over_wide_seams"]["value"] == 0.8
    assert targets["long_total_over_wide_seams"]["value"] == 0.8
    assert targets["long_first_over_wide_seams"]["value"] == 0.5
    assert "short_total_over_wide_seams" not in targets  # not run: not judged
    assert found["rows"]["answers"]["long"]["ours_wide_seams"] == {"first_s": 1.0, "total_s": 5.0, "cpu_s": 8.0}
    assert found["rows"]["concurrent"]["ours_wide_seams_wall_s"] == 20.0
    assert found["rows"]["concurrent"]["ours_wide_seams_decoded_per_heard"] == 1.1
