"""What word timestamps add to time to first audio: every overhead probe is paired with one on a
session that asked for them (``configure`` ``timestamps: true``), and the report compares the two
series' p50 (``bench.run`` collects them; docs/benchmarks.md)."""

from __future__ import annotations

from typing import Any

from .measure import spread


def summarize(raw: dict[str, Any], overhead: dict[str, Any]) -> dict[str, Any]:
    """The results' keys: the probes with timestamps, and their p50 minus ``overhead``'s (without)."""
    timed = spread([p["overhead_ms"] for p in raw.get("timestamp_probes", [])], digits=2)
    cost = None if timed.get("p50") is None or overhead.get("p50") is None else round(timed["p50"] - overhead["p50"], 2)
    return {"server_overhead_with_timestamps_ms": timed, "timestamps_ttfa_cost_p50_ms": cost}


def markdown(results: dict[str, Any]) -> list[str]:
    t = results["server_overhead_with_timestamps_ms"]
    return [f"| probes with word timestamps | {t.get('p50')} | {t.get('p95')} | {t.get('min')} | {t.get('max')} | "
            f"{t.get('n')} |", "",
            f"Word timestamps add **{results['timestamps_ttfa_cost_p50_ms']} ms** to time to first audio (p50 of the "
            "probes with them minus p50 without; target <= 2 ms)."]
