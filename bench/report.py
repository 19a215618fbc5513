"""Turn the raw measurements into ``latest.json``, ``latest.md``, ``traces.json`` and the plots.

``build`` is pure (raw numbers in, the results dict out), so the shape of ``latest.json`` is
defined in one place; ``write`` replaces the previous run's files in the output directory (and
only those: a README.md there is kept).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import plots, sagemaker_relay, timestamps
from .measure import CODECS, Trace, spread

SCHEMA_VERSION = 1
OUTPUT_FILES = ("latest.json", "latest.md", "traces.json", "timeline.png", "concurrency.png")
MODES = ("batch", "stream", "bidi")

#: The goals of issue 7, and AWS's published numbers for comparison.
TARGETS = {
    "stream_vs_batch_max": 0.15,
    "bidi_speedup_min": 4.0,
    "server_overhead_p50_max_ms": 5.0,
    "timestamps_ttfa_cost_p50_max_ms": 2.0,
    "ladder8_p95_vs_single_max": 3.0,
}
AWS_REFERENCE = {
    "ttfa_batch_ms": 329.3, "ttfa_stream_ms": 156.7, "stream_vs_batch": round(156.7 / 329.3, 3),
    "bidi_speedup_local": 2.4, "bidi_speedup_deployed": 3.5, "instance": "ml.g5.xlarge (A10G GPU)",
}


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(float(value), digits)


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(kept) if kept else None


def build(raw: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    traces: dict[str, list[Trace]] = raw["traces"]
    ttfa_samples = {m: [t.first_audio_s * 1000 for t in traces[m] if t.first_audio_s is not None] for m in MODES}
    full = {m: [t for t in traces[m] if t.full] for m in MODES}
    last_samples = {m: [t.last_audio_s * 1000 for t in full[m] if t.last_audio_s is not None] for m in MODES}
    ttfa = {m: _r(_median(ttfa_samples[m])) for m in MODES}

    probes = raw["overhead_probes"]
    overhead = spread([p["overhead_ms"] for p in probes], digits=2)
    words = timestamps.summarize(raw, overhead)
    in_scenario = spread([t.overhead_ms for t in traces["bidi"] if t.overhead_ms is not None], digits=2)

    concurrency = []
    ladder = raw["ladder"]
    for rung in ladder:
        s = spread(rung["ttfa_ms"])
        median = _median(rung["ttfa_ms"])
        concurrency.append({
            "sessions": rung["sessions"],
            "ttfa_p50_ms": s["p50"], "ttfa_p95_ms": s["p95"], "ttfa_min_ms": s["min"], "ttfa_max_ms": s["max"],
            "samples": s["n"], "rounds": rung["rounds"],
            "rtf": round(rung["audio_s"] / rung["wall_s"], 3),
            "fairness": round(max(rung["ttfa_ms"]) / median, 3) if median else None,
            "audio_s": round(rung["audio_s"], 2), "wall_s": round(rung["wall_s"], 2),
        })

    codecs: dict[str, dict[str, Any]] = {}
    pcm_raw = _median([b["first_byte_ms"] for b in raw["codecs"]["pcm"]["binary"]])
    pcm_corr = _median([s["first_minus_model_ms"] for s in raw["codecs"]["pcm"]["sse"]])
    for fmt in CODECS:
        binary, sse = raw["codecs"][fmt]["binary"], raw["codecs"][fmt]["sse"]
        size = _median([b["bytes"] for b in binary]) or 0.0
        audio_s = (_median([s["audio_ms"] for s in sse]) or 0.0) / 1000
        first = _median([b["first_byte_ms"] for b in binary])
        corrected = _median([s["first_minus_model_ms"] for s in sse])
        codecs[fmt] = {
            "bitrate_kbps": round(size * 8 / audio_s / 1000, 1) if audio_s else None,
            "first_byte_added_ms": _r(_diff(corrected, pcm_corr), 2),
            "first_byte_added_raw_ms": _r(_diff(first, pcm_raw), 1),
            "first_byte_ms": _r(first),
            "first_byte_minus_model_ms": _r(corrected, 2),
            "bytes": int(size), "audio_s": round(audio_s, 3), "samples": len(binary),
        }

    ratio = ttfa["stream"] / ttfa["batch"] if ttfa["stream"] and ttfa["batch"] else None
    speedup = ttfa["batch"] / ttfa["bidi"] if ttfa["batch"] and ttfa["bidi"] else None
    single = next((c for c in concurrency if c["sessions"] == 1), None)
    eight = next((c for c in concurrency if c["sessions"] == 8), None)
    ladder_ratio = (eight["ttfa_p95_ms"] / single["ttfa_p50_ms"]) if single and eight else None
    first_model_ms = _median([p.get("first_audio_synthesis_ms", p["synthesis_ms"]) for p in probes])
    # The ladder's TTFA counts from the answer's start: its text arrives first_fragment_ms later.
    arrives = raw["ladder_scenario"]["first_fragment_ms"]
    floor_ratio = ((eight["ttfa_p95_ms"] - arrives) / (8 * first_model_ms)) if eight and first_model_ms else None
    chunker = raw["chunker"]
    scenario = raw["scenario"]
    results: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "timestamp": meta["timestamp"],
        "quick": meta["quick"],
        "engine": meta["engine"],
        "device": meta["device"],
        "model": meta["model"],
        "machine": meta["machine"],
        "repeats": min(len(ttfa_samples[m]) for m in MODES),
        "plan": meta["plan"],
        "budget_trimmed": meta["budget_trimmed"],
        "wall_s": meta["wall_s"],
        "server_start_s": meta["server_start_s"],
        "scenario": scenario,
        "ttfa_ms": ttfa,
        "ttfa_spread_ms": {m: spread(ttfa_samples[m]) for m in MODES},
        "last_audio_ms": {m: _r(_median(last_samples[m])) for m in MODES},
        "last_audio_spread_ms": {m: spread(last_samples[m]) for m in MODES},
        "audio_s": {m: round(_median([t.audio_s for t in full[m]]) or 0.0, 2) for m in MODES},
        # The engine's own time over the full bidi run (sum of utterance_end.synthesis_ms): compare
        # with last_audio_ms.bidi to tell a slow model from time lost between utterances.
        "bidi_full_run_synthesis_ms": _r(_median([t.synthesis_ms for t in full["bidi"]])),
        "ratio_stream_vs_batch": _r(ratio, 3),
        "speedup_bidi_vs_batch": _r(speedup, 2),
        "server_overhead_ms": overhead,
        "server_overhead_in_scenario_ms": in_scenario,
        "sagemaker_relay_ms": sagemaker_relay.summarize(raw.get("sagemaker_relay")),
        **words,
        "engine_first_fragment_ms": spread([p["synthesis_ms"] for p in probes]),
        "engine_rtf": _engine_rtf(probes),
        # what the server measured at warm-up and sizes windows by (sizing.Cost.pace): a first window,
        # and so the first-audio rows and the 8-session floor, move with it from run to run
        "decoder_pace": _r(raw["ping"].get("decoder_pace"), 3),
        "concurrency": concurrency,
        "ladder_scenario": raw["ladder_scenario"],
        "codecs": codecs,
        "codec_text": raw["codec_text"],
        "chunker_mb_per_s": chunker["mb_per_s"],
        "chunker": chunker,
        "quiesce_timeouts": raw["quiesce_timeouts"],
        "aws_reference": AWS_REFERENCE,
    }
    results["targets"] = [
        _target("stream TTFA / batch TTFA", "<= 0.15", ratio, ratio is not None and ratio <= 0.15),
        _target("bidi speedup vs batch (TTFA)", ">= 4x", speedup, speedup is not None and speedup >= 4.0),
        _target("server overhead p50 (ms)", "<= 5 ms", overhead.get("p50"),
                overhead.get("p50") is not None and overhead["p50"] <= 5.0),
        _target("word timestamps' cost to TTFA, p50 (ms)", "<= 2 ms", cost := words["timestamps_ttfa_cost_p50_ms"],
                cost is not None and cost <= 2.0),
        _target("p95 TTFA at 8 sessions / single-session p50 TTFA", "<= 3x", ladder_ratio,
                ladder_ratio is not None and ladder_ratio <= 3.0),
        _target("p95 TTFA at 8 sessions from the text's arrival / (8 x first-window model time)", "<= 1.2x",
                floor_ratio,
                floor_ratio is not None and floor_ratio <= 1.2),
    ]
    return results


def _engine_rtf(probes: list[dict[str, float]]) -> float | None:
    """Model seconds per audio second on the probe fragment (below 1 = faster than real time)."""
    ratios = [p["synthesis_ms"] / p["audio_ms"] for p in probes if p.get("audio_ms")]
    return _r(_median(ratios), 3)


def _target(name: str, goal: str, value: float | None, met: bool) -> dict[str, Any]:
    return {"name": name, "target": goal, "value": _r(value, 3), "met": bool(met) if value is not None else None}


def summary_text(results: dict[str, Any]) -> str:
    model = results["model"]
    lines = [
        "",
        f"== make bench: {results['engine']} on {results['device']}, model {model['kind']} ({model['dir']})",
    ]
    if not model["real_weights"]:
        lines.append("   NOTE: not the real Kokoro weights; the numbers show the harness and server plumbing, "
                     "not Kokoro's speed. " + model["note"])
    m = results["machine"]
    lines.append(f"   machine: {m['cpu_count']} CPUs ({m['cpu_model']}), load {m['loadavg_1m_start']} -> "
                 f"{m['loadavg_1m_end']}, engine RTF {results['engine_rtf']} (model s per audio s), "
                 f"{results['repeats']} TTFA samples/mode, wall {results['wall_s']} s")
    for mode in MODES:
        s = results["ttfa_spread_ms"][mode]
        lines.append(f"   TTFA {mode:6s} p50 {s.get('p50')} ms (min {s.get('min')}, max {s.get('max')}, "
                     f"n {s.get('n')}); "
                     f"last audio {results['last_audio_ms'][mode]} ms")
    for t in results["targets"]:
        verdict = "n/a" if t["met"] is None else ("MET" if t["met"] else "NOT MET")
        lines.append(f"   [{verdict:7s}] {t['name']}: {t['value']} (target {t['target']})")
    lines.append(f"   AWS reference: stream/batch {AWS_REFERENCE['stream_vs_batch']} (329.3 -> 156.7 ms), "
                 f"bidi {AWS_REFERENCE['bidi_speedup_local']}x local / "
                 f"{AWS_REFERENCE['bidi_speedup_deployed']}x deployed")
    if results["budget_trimmed"]:
        lines.append(f"   budget trimmed: {', '.join(results['budget_trimmed'])}")
    return "\n".join(lines)


def markdown(results: dict[str, Any]) -> str:
    model = results["model"]
    m = results["machine"]
    sc = results["scenario"]
    out = [
        f"# Benchmark results ({results['timestamp']})",
        "",
        f"- engine **{results['engine']}** on **{results['device']}**, model: {model['kind']} "
        f"(`{model['dir']}`; {model['note']})" + ("" if model["real_weights"] else
                                                  " — **not real weights: plumbing numbers only**"),
        f"- machine: {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}, Python {m['python']}, "
        f"torch threads {m['torch_threads']}, onnx threads {m['onnx_threads']}, "
        f"load average {m['loadavg_1m_start']} at start, {m['loadavg_1m_end']} at end",
        f"- engine speed: {results['engine_rtf']} model seconds per audio second on the first fragment; "
        f"windows cut at decoder pace {results['decoder_pace']} (measured at the server's warm-up)",
        f"- scenario: {sc['paragraphs']} paragraphs, {sc['chars']} characters in {sc['tokens']} tokens; "
        f"first fragment at {sc['first_fragment_ms']} ms, first sentence at {sc['first_sentence_ms']} ms, "
        f"answer complete at {sc['answer_ms']} ms (time zero = start of the answer)",
        f"- {results['repeats']} TTFA samples per mode (one full run each); wall time {results['wall_s']} s"
        + (f"; trimmed by the time budget: {', '.join(results['budget_trimmed'])}"
           if results["budget_trimmed"] else ""),
        "",
        "## Targets",
        "",
        "| goal | target | measured | verdict |",
        "|---|---|---|---|",
    ]
    for t in results["targets"]:
        verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "**not met**")
        out.append(f"| {t['name']} | {t['target']} | {t['value']} | {verdict} |")
    out += [
        "",
        f"AWS reference (sample on {AWS_REFERENCE['instance']}): stream/batch "
        f"{AWS_REFERENCE['stream_vs_batch']} (329.3 -> 156.7 ms), bidi {AWS_REFERENCE['bidi_speedup_local']}x "
        f"(local) to {AWS_REFERENCE['bidi_speedup_deployed']}x (deployed) faster to first audio than batch.",
        "",
        "## Time to first audio and to last audio (ms from the start of the answer)",
        "",
        "| mode | TTFA p50 | p95 | min | max | n | last audio p50 | audio s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode in MODES:
        s = results["ttfa_spread_ms"][mode]
        out.append(f"| {mode} | {s.get('p50')} | {s.get('p95')} | {s.get('min')} | {s.get('max')} | {s.get('n')} | "
                   f"{results['last_audio_ms'][mode]} | {results['audio_s'][mode]} |")
    o, oi = results["server_overhead_ms"], results["server_overhead_in_scenario_ms"]
    out += [
        "",
        f"stream/batch = **{results['ratio_stream_vs_batch']}**, bidi speedup vs batch = "
        f"**{results['speedup_bidi_vs_batch']}x**",
        "",
        "## Server overhead (WebSocket TTFA minus the engine's synthesis_ms, first fragment)",
        "",
        "| source | p50 ms | p95 ms | min | max | n |",
        "|---|---|---|---|---|---|",
        f"| dedicated probes | {o.get('p50')} | {o.get('p95')} | {o.get('min')} | {o.get('max')} | {o.get('n')} |",
        f"| bidi scenario runs | {oi.get('p50')} | {oi.get('p95')} | {oi.get('min')} | {oi.get('max')} | "
        f"{oi.get('n')} |",
        *timestamps.markdown(results),
        *sagemaker_relay.markdown(results.get("sagemaker_relay_ms")),
        "",
        f"## Concurrency ladder (bidi scenario, first {results['ladder_scenario']['paragraphs']} paragraph(s), "
        "all sessions start together)",
        "",
        "| sessions | TTFA p50 ms | p95 ms | max ms | samples | audio s / wall s | fairness (max/median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in results["concurrency"]:
        out.append(f"| {c['sessions']} | {c['ttfa_p50_ms']} | {c['ttfa_p95_ms']} | {c['ttfa_max_ms']} | "
                   f"{c['samples']} | {c['rtf']} | {c['fairness']} |")
    out += [
        "",
        f"## Codecs (POST /invocations, {results['codec_text']!r})",
        "",
        "| format | bitrate kbps | first byte added vs pcm, model time removed (ms) | raw first byte added (ms) | "
        "first byte p50 (ms) |",
        "|---|---|---|---|---|",
    ]
    for fmt, c in results["codecs"].items():
        out.append(f"| {fmt} | {c['bitrate_kbps']} | {c['first_byte_added_ms']} | {c['first_byte_added_raw_ms']} | "
                   f"{c['first_byte_ms']} |")
    quality = results.get("codec_quality")
    if quality:
        out += ["", "Quality against pcm (PESQ wideband, 1.0-4.64, higher is better):", "",
                "| format | requested rate (Hz) | kbps | PESQ wb |", "|---|---|---|---|"]
        out += [f"| {r['format']} | {r['sample_rate']} | {r['kbps']} | {r['pesq_wb']} |" for r in quality["rows"]]
    ch = results["chunker"]
    out += [
        "",
        f"## Sentence chunker: {results['chunker_mb_per_s']} MB/s, {ch['us_per_fragment']} µs per fragment "
        f"({ch['fragments']} fragments, best of {ch['repeats']})",
        "",
        "Plots: `timeline.png` (text released vs audio received, per mode), `concurrency.png` (the ladder).",
        "",
    ]
    return "\n".join(out)


def _json_default(value: Any) -> Any:
    if isinstance(value, Trace):
        return {"mode": value.mode, "full": value.full, "first_audio_s": value.first_audio_s,
                "last_audio_s": value.last_audio_s, "audio_s": round(value.audio_s, 4),
                "first_send_s": value.first_send_s, "first_synthesis_ms": value.first_synthesis_ms,
                "synthesis_ms": value.synthesis_ms, "utterances": value.utterances,
                **(value.timeline() if value.full else {})}
    raise TypeError(f"cannot serialise {type(value).__name__}")


def write(results: dict[str, Any], raw: dict[str, Any], out: Path) -> list[Path]:
    """Replace the previous run's files in ``out`` (written to temporaries, then renamed)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUT_FILES:
        (out / name).unlink(missing_ok=True)
    written: list[Path] = []

    def put(name: str, text: str) -> None:
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, out / name)
        written.append(out / name)

    put("latest.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    put("latest.md", markdown(results))
    traces = {"traces": raw["traces"], "ladder": raw["ladder"], "overhead_probes": raw["overhead_probes"],
              "codecs": raw["codecs"]}
    put("traces.json", json.dumps(traces, default=_json_default, ensure_ascii=False) + "\n")
    plots.plot_timeline(raw, results, out / "timeline.png")
    written.append(out / "timeline.png")
    plots.plot_concurrency(results, out / "concurrency.png")
    written.append(out / "concurrency.png")
    return written
