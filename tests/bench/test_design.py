"""bench/design.py's arithmetic: playback stall, p95, and how targets are judged (no timing)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import design
from bench.measure import PCM_BYTES_PER_S

SECOND = PCM_BYTES_PER_S  # bytes of one second of pcm


@pytest.mark.parametrize("chunks,stall", [
    ([(0.0, SECOND), (0.5, SECOND), (1.9, SECOND)], 0.0),  # each arrives before the player runs dry
    ([(0.0, SECOND), (1.5, SECOND)], 0.5),  # half a second of silence
    ([(1.5, SECOND), (0.0, SECOND)], 0.5),  # arrival order, not list order
    ([(0.0, SECOND // 2), (1.0, SECOND // 2), (3.0, SECOND)], 0.5 + 1.5),  # stalls add up
    ([], 0.0),
])
def test_playback_stall_is_silence_after_the_first_byte(chunks: list[tuple[float, int]], stall: float) -> None:
    assert design.playback_stall_s(chunks) == pytest.approx(stall)


@pytest.mark.parametrize(("chunks", "offset", "plays_at"), [
    ([(0.5, SECOND)], 0, 0.5),  # the first byte plays as it arrives
    ([(0.5, SECOND)], SECOND // 4, 0.75),
    ([(0.5, SECOND // 2), (0.6, SECOND // 2)], SECOND // 2 + 2, 1.0 + 2 / SECOND),  # queued behind the first
    ([(0.0, SECOND // 2), (1.0, SECOND)], SECOND // 2, 1.0),  # after a stall: when it arrives
])
def test_plays_at_is_when_the_stalling_player_reaches_a_byte(chunks: list[tuple[float, int]], offset: int,
                                                              plays_at: float) -> None:
    assert design.plays_at_s(chunks, offset) == pytest.approx(plays_at)
    with pytest.raises(ValueError, match="past the stream"):
        design.plays_at_s(chunks, sum(size for _, size in chunks))


def test_p95_is_an_observed_value() -> None:
    assert design.p95([]) is None
    assert design.p95([3.0]) == 3.0
    assert design.p95(list(map(float, range(1, 21)))) == 19.0
    assert design.p95(list(map(float, range(1, 101)))) == 95.0


def _design(deadline: list[float], round_robin: list[float], ratio: float | None) -> dict[str, Any]:
    def rows(stalls: list[float]) -> list[dict[str, Any]]:
        return [{"sessions": n, "ttfa_p95_ms": 100.0, "stall_ms_per_audio_min": s,
                 "stall_by_pattern": [s - 1.0, s + 1.0]} for n, s in zip((2, 4, 8), stalls)]

    return {"factorial_ttfa_ms": {"windowed": {"sentence/stream": 1.0, "sentence/bidi": 2.0,
                                               "fragment/stream": 3.0, "fragment/bidi": 4.0}},
            "sentence_ttfa": {"windowed": {"short_ms": 300.0, "long_ms": 400.0, "ratio": ratio}},
            "arrival_load": {"deadline": rows(deadline), "round_robin": rows(round_robin)},
            "arrival_spread_s": 6.0,
            "throughput": {"sentences": 8, "ours_windowed": {"s": 3.0}, "ours_one_shot": {"s": 2.8},
                           "kpipeline": {"s": 3.3}, "ours_windowed_over_baseline": 0.909}}


def test_targets_judge_stall_against_round_robin_in_the_same_run() -> None:
    met = {t["name"]: t["met"] for t in design.targets(_design([0.0, 10.0, 40.0], [5.0, 30.0, 60.0], 1.2))}
    assert met == {
        "paragraph as one message: ours / one-shot loop (time)": True,
        "TTFA 35-word / 6-word sentence (windowed)": True,
        "stall at 2 arriving sessions, ms per audio minute (deadline)": True,
        "stall at 4 arriving sessions, deadline / round-robin": True,
        "stall at 8 arriving sessions, deadline / round-robin": False,  # 40 > 0.5 x 60
    }
    missed = {t["name"]: t["met"] for t in design.targets(_design([1.0, 10.0, 10.0], [0.0, 10.0, 30.0], 2.0))}
    assert missed["TTFA 35-word / 6-word sentence (windowed)"] is False
    assert missed["stall at 2 arriving sessions, ms per audio minute (deadline)"] is False
    assert missed["stall at 4 arriving sessions, deadline / round-robin"] is False


def test_markdown_shows_every_measured_cell() -> None:
    text = design.markdown(_design([0.0, 10.0, 40.0], [5.0, 30.0, 60.0], 1.2))
    for cell in ("| windowed | sentence | 1.0 | 2.0 |", "| windowed | fragment | 3.0 | 4.0 |",
                 "| windowed | 300.0 | 400.0 | 1.2 |", "| round_robin | 8 | 100.0 | 60.0 | 59.0, 61.0 |",
                 "ours (windowed) 3.0 s, ours (one-shot) 2.8 s, kpipeline 3.3 s"):
        assert cell in text
