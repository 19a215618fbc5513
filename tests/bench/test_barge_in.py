"""bench.barge_in: a round against the real server, and the ratio as the median of each round's."""

from __future__ import annotations

import asyncio

from kokoro_server_fixture import KokoroServer

from bench.barge_in import one_round, summarize


def test_a_round_times_a_fresh_answer_and_one_right_after_a_cancel(kokoro_server: KokoroServer) -> None:
    sentences = ["The first of a long answer is here.", "A second one follows it.", "And a third one."]
    found = asyncio.run(asyncio.wait_for(one_round(kokoro_server.url, sentences, 0.05), 120))
    assert set(found) == {"fresh_s", "after_cancel_s"} and all(0 < v < 60 for v in found.values())


def test_the_ratio_is_the_median_of_each_rounds_ratio() -> None:
    # the second round ran on a host twice as slow: its ratio is the same, its times are not
    def side(fresh: float, after: float) -> dict[str, float]:
        return {"fresh_s": fresh, "after_cancel_s": after}

    rounds = [{"production": side(1.0, 1.1), "no_halt": side(1.0, 2.0)},
              {"production": side(2.0, 2.2), "no_halt": side(2.0, 4.0)},
              {"production": side(1.0, 1.1), "no_halt": side(1.0, 3.0)}]
    found = summarize(rounds)
    assert found["production"] == {"fresh_ms_median": 1000.0, "after_cancel_ms_median": 1100.0, "ratio_median": 1.1}
    assert found["no_halt"]["ratio_median"] == 2.0
