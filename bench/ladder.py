"""Sessions at once: the simultaneous-start ladder (all sessions start the scenario together)."""

from __future__ import annotations

import asyncio
from typing import Any

from .measure import RUN_TIMEOUT_S, BenchError, Target, bidi_session, close_ws, now, open_ws
from .scenario import Scenario


async def ladder_rung(target: Target, scenario: Scenario, sessions: int) -> dict[str, Any]:
    """``sessions`` agents, each on its own WebSocket, all starting the scenario at the same
    time zero. Returns per-session TTFA and audio, and the wall time to the last audio."""
    sockets = [await open_ws(target) for _ in range(sessions)]
    try:
        t0 = now() + 0.2
        traces = await asyncio.wait_for(
            asyncio.gather(*(bidi_session(ws, scenario, t0, full=True, mode=f"ladder{sessions}") for ws in sockets)),
            RUN_TIMEOUT_S,
        )
    finally:
        await asyncio.gather(*(close_ws(ws) for ws in sockets), return_exceptions=True)
    ttfa = [t.first_audio_s * 1000 for t in traces if t.first_audio_s is not None]
    if len(ttfa) != sessions:
        raise BenchError(f"{sessions - len(ttfa)} of {sessions} sessions got no audio")
    last = max(t.last_audio_s or 0.0 for t in traces)
    return {
        "ttfa_ms": ttfa,
        "audio_s": sum(t.audio_s for t in traces),
        "wall_s": last,
        "overhead_ms": [t.overhead_ms for t in traces if t.overhead_ms is not None],
    }
