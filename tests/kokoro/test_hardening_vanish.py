"""Issue 11's reproduction, bounded: clients that vanish or cancel mid-encode in mp3, opus and aac,
eight at a time, on a server of its own (if it crashes, no other test loses its server).

Before the fix, a close of the codec from the event loop while a worker thread was inside
``container.mux`` killed the server with a segfault in libavformat within 4-15 rounds (3 of 3
runs of bench.vanish). ``make soak`` runs the long version (bench/results/soak.json)."""

from __future__ import annotations

import asyncio

import pytest
from kokoro_harness import Server

from bench.vanish import holds, vanish

pytestmark = pytest.mark.kokoro

ROUNDS = 10
SESSIONS = 8


def test_clients_vanishing_mid_encode_never_crash_the_server(own_server: Server) -> None:
    assert own_server.process is not None  # started
    report = asyncio.run(vanish(http_url=own_server.http, pid=own_server.process.pid,
                                sessions=SESSIONS, rounds=ROUNDS, seconds=240, seed=11))
    log = own_server.log.read_text(errors="replace")[-3000:]
    assert report.server_alive, f"the server died after {report.rounds} rounds:\n{log}"
    assert own_server.process.poll() is None
    # the reproduction did what it says: sessions left mid-stream, cancelled and switched formats
    assert report.rounds == ROUNDS and report.vanished == SESSIONS * ROUNDS
    assert report.audio_frames > 0 and report.cancels > 0 and report.format_changes > 0
    # the model kept working for a client that left for at most the one chunk it was running
    assert 0 <= report.orphaned_jobs <= report.vanished, report
    assert holds(report), f"after the run: clean requests ok={report.clean_requests_ok}, idle={report.idle_after}"
    assert "Traceback" not in own_server.log.read_text(errors="replace")
