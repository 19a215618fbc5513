"""`make bench` must not rot: run the harness with its smallest settings against the REAL Kokoro
server (tiny random-weight model, shared test fixture) and check the shape of what it writes.

No timed assertions: the machine is shared and noisy, so only the output's shape, its internal
consistency and that every number is finite (and positive where a duration, rate or size must
be) are checked. The schedule tests check the simulated agent's pacing as computed, not as slept.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kokoro_server_fixture import KokoroServer

from bench import models as bench_models
from bench.scenario import ANSWER_PARAGRAPHS, agent_answer

REPO = Path(__file__).resolve().parents[2]
MODES = ("batch", "stream", "bidi")
CODECS = ("pcm", "wav", "mp3", "opus", "aac", "flac")
# Numbers that may be zero or negative, and why.
SIGNED = {
    "first_byte_added_ms",  # a difference vs pcm: pcm itself is 0, noise can make others negative
    "first_byte_added_raw_ms",
    "quiesce_timeouts",  # a count of problems, normally 0
    "timestamps_ttfa_cost_p50_ms",  # with timestamps minus without: noise can make it negative
}
NON_NEGATIVE = {"loadavg_1m_start", "loadavg_1m_end"}


def numbers(node: Any, path: str = "") -> list[tuple[str, float]]:
    """Every numeric leaf (not bools) as (dotted path, value)."""
    if isinstance(node, bool) or node is None:
        return []
    if isinstance(node, (int, float)):
        return [(path, float(node))]
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in numbers(value, f"{path}.{key}" if path else key)]
    if isinstance(node, list):
        return [item for i, value in enumerate(node) for item in numbers(value, f"{path}[{i}]")]
    return []


@pytest.fixture(scope="module")
def quick_results(kokoro_server: KokoroServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "results"
    out.mkdir()
    (out / "README.md").write_text("kept\n")
    (out / "latest.json").write_text("{}")  # a previous run's file: replaced
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--url", kokoro_server.url,
         "--model-dir", str(kokoro_server.model_dir), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, (
        f"bench.run failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}\n"
        f"server log:\n{kokoro_server.log_tail()}"
    )
    return {"out": out, "stdout": proc.stdout, "json": json.loads((out / "latest.json").read_text())}


def test_quick_run_writes_every_output(quick_results: dict[str, Any]) -> None:
    out: Path = quick_results["out"]
    for name in ("latest.json", "latest.md", "traces.json"):
        assert (out / name).stat().st_size > 0, name
    for name in ("timeline.png", "concurrency.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert (out / "README.md").read_text() == "kept\n"
    assert "| batch |" in (out / "latest.md").read_text()
    # the pace the server sizes windows by, as its /ping reported it: a run's first windows depend on it
    assert f"windows cut at decoder pace {quick_results['json']['decoder_pace']} " in (out / "latest.md").read_text()
    assert "| added by the relay (paired overhead difference) |" in (out / "latest.md").read_text()
    traces = json.loads((out / "traces.json").read_text())
    for mode in MODES:
        full = [t for t in traces["traces"][mode] if t["full"]]
        assert full and full[0]["audio"] and full[0]["text"], mode
    summary = quick_results["stdout"]
    assert summary.count("MET") >= 4  # "MET" or "NOT MET", one per target


def test_latest_json_has_the_documented_shape(quick_results: dict[str, Any]) -> None:
    data = quick_results["json"]
    for key in ("ttfa_ms", "ttfa_spread_ms", "ratio_stream_vs_batch", "speedup_bidi_vs_batch",
                "server_overhead_ms", "concurrency", "codecs", "chunker_mb_per_s", "engine", "machine",
                "model", "repeats", "timestamp", "last_audio_ms", "targets"):
        assert key in data, key
    assert data["decoder_pace"] > 0  # windowed decoding by default: the pace was measured at warm-up
    assert set(data["ttfa_ms"]) == set(MODES)
    for mode in MODES:
        assert {"p50", "p95", "min", "max", "n"} <= set(data["ttfa_spread_ms"][mode])
        assert data["ttfa_spread_ms"][mode]["p50"] == data["ttfa_ms"][mode]
    assert {"p50", "p95"} <= set(data["server_overhead_ms"])
    assert [c["sessions"] for c in data["concurrency"]] == [1, 2, 4, 8]
    for rung in data["concurrency"]:
        assert {"sessions", "ttfa_p50_ms", "ttfa_p95_ms", "rtf", "fairness"} <= set(rung)
        assert rung["samples"] >= rung["sessions"]
        assert rung["fairness"] >= 1.0
    assert set(data["codecs"]) == set(CODECS)
    for fmt in CODECS:
        assert {"bitrate_kbps", "first_byte_added_ms"} <= set(data["codecs"][fmt])
    assert data["codecs"]["pcm"]["first_byte_added_ms"] == 0.0
    assert {"cpu_count", "platform", "python", "torch_threads"} <= set(data["machine"])
    assert data["engine"] == "torch"
    assert data["model"]["real_weights"] is False  # the tiny model: said so in the output
    assert data["repeats"] >= 1 and data["quick"] is True
    relay = data["sagemaker_relay_ms"]  # bidi through the SageMaker stand-in vs the direct WebSocket
    assert relay["direct_ttfa"]["n"] == relay["relayed_ttfa"]["n"] == relay["added"]["n"] >= 2
    assert len(data["targets"]) == 6 and all(isinstance(t["met"], bool) for t in data["targets"])
    # Word timestamps priced: probes with them paired with the probes without.
    assert data["server_overhead_with_timestamps_ms"]["n"] == data["server_overhead_ms"]["n"] >= 2
    assert math.isclose(data["timestamps_ttfa_cost_p50_ms"], data["server_overhead_with_timestamps_ms"]["p50"]
                        - data["server_overhead_ms"]["p50"], abs_tol=0.02)
    # Derived numbers agree with what they are derived from (rounding aside).
    ttfa = data["ttfa_ms"]
    assert math.isclose(data["ratio_stream_vs_batch"], ttfa["stream"] / ttfa["batch"], rel_tol=0.01, abs_tol=0.002)
    assert math.isclose(data["speedup_bidi_vs_batch"], ttfa["batch"] / ttfa["bidi"], rel_tol=0.01, abs_tol=0.01)
    assert math.isclose(data["codecs"]["pcm"]["bitrate_kbps"], 384.0, rel_tol=0.01)  # s16le at 24 kHz


def test_every_number_is_finite_and_positive(quick_results: dict[str, Any]) -> None:
    found = numbers(quick_results["json"])
    assert len(found) > 100
    differences = {f"targets[{i}].value" for i, t in enumerate(quick_results["json"]["targets"])
                   if "timestamps" in t["name"]}  # the timestamps target's value is a difference too
    for path, value in found:
        leaf = path.rsplit(".", 1)[-1]
        assert math.isfinite(value), path
        if leaf in SIGNED or path in differences or path.startswith("sagemaker_relay_ms.added."):
            continue  # a difference: noise can make it negative
        if leaf in NON_NEGATIVE:
            assert value >= 0, path
            continue
        assert value > 0, f"{path} = {value}"


def test_the_agent_answer_is_paced_as_specified() -> None:
    scenario = agent_answer()
    assert scenario.paragraphs == len(ANSWER_PARAGRAPHS) == 6
    assert scenario.text == "\n\n".join(ANSWER_PARAGRAPHS)
    assert 3.0 <= len(scenario.text) / len(scenario.tokens) <= 5.0  # ~4 characters a token
    assert math.isclose(scenario.first_sentence_s(), 0.6) and math.isclose(scenario.answer_s, 5.0)
    assert 0 < scenario.first_token_s < scenario.first_fragment_s() < scenario.first_sentence_s()
    assert list(scenario.times) == sorted(scenario.times)
    assert scenario.tokens == agent_answer().tokens  # deterministic
    part = scenario.truncated(2)
    assert part.text == "\n\n".join(ANSWER_PARAGRAPHS[:2]) and part.times == scenario.times[: len(part.times)]
    assert scenario.first_sentence_only().text == scenario.first_piece(early_first_fragment=False)


def test_model_directories_are_classified(tmp_path: Path) -> None:
    packaged = tmp_path / "packaged"
    packaged.mkdir()
    (packaged / "manifest.json").write_text(json.dumps({"engine": "onnx", "weights": "w.onnx"}))
    assert bench_models.classify_model_dir(packaged) == ("Kokoro-82M onnx (w.onnx)", True)
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "config.json").write_text(json.dumps({"plbert": {"hidden_size": 32}}))
    kind, real = bench_models.classify_model_dir(tiny)
    assert real is False and "tiny" in kind
    chosen = bench_models.choose_model(model_dir=str(tiny), quick=False, python=Path("/nonexistent"))
    assert chosen.dir == tiny and chosen.real_weights is False
