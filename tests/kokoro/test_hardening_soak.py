"""A small soak (bench/soak.py) in every test run: 32 concurrent sessions, random cancels. The
long one is ``python -m bench.soak`` (32 sessions x 20 turns by default)."""

from __future__ import annotations

import asyncio
import json

import pytest
from kokoro_harness import Server

from bench.soak import soak

pytestmark = pytest.mark.kokoro


def test_32_sessions_with_random_cancels_cross_nothing_and_leak_nothing(own_server: Server) -> None:
    roomy = own_server  # its own: the soak's figures (RSS, descriptors, tasks) are this process's alone
    assert roomy.process is not None  # started
    result = asyncio.run(soak(http_url=roomy.http, pid=roomy.process.pid, sessions=32, turns=2,
                              cancel_rate=0.3, seed=8, rss_tolerance_mib=64.0, warmup_turns=1))
    print(json.dumps(result))
    assert result["problems"] == []
    assert result["turns_done"] == 64 and result["cancels"] > 0 and result["utterances"] > 0
    # every finished utterance's audio is byte for byte its text rendered alone (bench.soak.reference_hashes)
    assert result["audio_verified"] == result["utterances"]
    assert result["max_concurrent_sessions"] >= 16  # they really ran side by side
