"""`bench.capacity` against the REAL server (tiny model, shared fixture): the ladder, its stop
rule, and a result `deploy-tts plan` reads. No timing assertions: budgets are set so that
any machine passes (1e9 ms) or none does (-1 ms)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from kokoro_server_fixture import KokoroServer  # the kokoro_server fixture: tests/conftest.py

from bench import capacity
from cli import plan


def _ladder(server: KokoroServer, rungs: list[int], budget_ms: float) -> list[capacity.Rung]:
    return asyncio.run(capacity.ladder(ws_url=server.ws_url, log=server.log, rungs=rungs,
                                       budget_ms=budget_ms, stall_ms=10**9))


def test_every_utterance_of_every_session_is_counted(kokoro_server: KokoroServer, tmp_path: Path) -> None:  # noqa: F811
    rungs = _ladder(kokoro_server, [1, 2], 1e9)
    assert [(r.sessions, r.utterances, r.ok) for r in rungs] == [(1, 3, True), (2, 6, True)]
    assert all(r.first_audio_p95_ms >= 0 and r.stall_ms_total >= 0 for r in rungs)
    report = capacity.result(rungs=rungs, instance_type="ml.m5.xlarge", budget_ms=1e9, stall_ms=0, model="tiny")
    out = tmp_path / "capacity.json"
    out.write_text(json.dumps(report))
    found = plan.measured_capacity("ml.m5.xlarge", (out,))
    assert found is not None and found.sessions == 2


def test_the_ladder_stops_at_the_first_rung_over_budget(kokoro_server: KokoroServer) -> None:  # noqa: F811
    rungs = _ladder(kokoro_server, [1, 2, 4], -1.0)
    assert [r.sessions for r in rungs] == [1] and not rungs[0].ok
    assert capacity.result(rungs=rungs, instance_type="local", budget_ms=-1.0, stall_ms=0,
                           model="tiny")["capacity"]["sessions"] == 0


def test_p95_is_nearest_rank() -> None:
    assert capacity.p95([float(v) for v in range(1, 21)]) == 19.0
    assert capacity.p95([5.0]) == 5.0
