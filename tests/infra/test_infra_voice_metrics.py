"""The metric filters the endpoint stack deploys, evaluated on REAL log lines of the server.

The server is the real one (tests/kokoro_server_fixture.py, tiny model); the patterns are read
from the synthesized template, not from infra's Python, so what is tested is what is deployed.
The matcher (filter_pattern.py) is ours: it proves our reading of CloudWatch's syntax, and it
refuses any pattern outside the small subset we rely on.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from filter_pattern import clauses, matches, value
from infra_support import Synthesized
from kokoro_server_fixture import KokoroServer, kokoro_python  # the kokoro_server fixture: tests/conftest.py

REPO = Path(__file__).resolve().parents[2]


def deployed_filters(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """Metric name -> the MetricFilter's properties, from the synthesized endpoint stack."""
    resources = synth.templates["KokoroTtsEndpoint"]["Resources"]
    found = {}
    for resource in resources.values():
        if resource["Type"] == "AWS::Logs::MetricFilter":
            props = resource["Properties"]
            (transform,) = props["MetricTransformations"]
            found[transform["MetricName"]] = props
    return found


async def _speak_over_websocket(server: KokoroServer) -> None:
    async with websockets.connect(server.ws_url) as ws:
        await ws.send(json.dumps({"type": "configure", "format": "wav"}))
        await ws.send(json.dumps({"type": "speak", "id": "m1", "text": "Metrics are lines."}))
        await ws.send(json.dumps({"type": "flush"}))
        for _ in range(200):  # bounded: a turn of one short utterance
            message = await asyncio.wait_for(ws.recv(), 60)
            if isinstance(message, str) and json.loads(message)["type"] == "turn_end":
                break
        await ws.send(json.dumps({"type": "close"}))


def _metric_lines(server: KokoroServer, want: int) -> list[str]:
    """The server log's JSON lines, once at least ``want`` utterance lines are there (bounded)."""
    lines: list[str] = []
    for _ in range(100):
        lines = [ln for ln in server.log.read_text(errors="replace").splitlines() if ln.startswith("{")]
        if sum('"kokoro_metric":"utterance"' in ln for ln in lines) >= want:
            break
        time.sleep(0.1)
    return lines


@pytest.fixture(scope="module")
def server_lines(kokoro_server: KokoroServer) -> list[str]:  # noqa: F811
    before = sum('"kokoro_metric":"utterance"' in ln for ln in _metric_lines(kokoro_server, 0))
    response = httpx.post(f"{kokoro_server.url}/invocations", timeout=120,
                          json={"text": "Hello there. A second sentence.", "format": "mp3"})
    assert response.status_code == 200 and response.content
    asyncio.run(_speak_over_websocket(kokoro_server))
    return _metric_lines(kokoro_server, before + 2)


def test_every_deployed_pattern_is_plain_json_field_selection(default_synth: Synthesized) -> None:
    filters = deployed_filters(default_synth)
    assert set(filters) >= {"FirstAudioMs", "SynthesisMs", "StallMs", "Utterances", "OpenSessions",
                            "QueuedModelJobs", "ContainerRestarts", "SlowFirstAudio"}
    groups = default_synth.templates["KokoroTtsEndpoint"]["Resources"]
    for name, props in filters.items():
        # The stack's own log group, named where SageMaker writes the endpoint's container output.
        group = groups[props["LogGroupName"]["Ref"]]
        assert group["Properties"]["LogGroupName"] == "/aws/sagemaker/Endpoints/kokoro-tts", name
        assert clauses(props["FilterPattern"]), name  # raises outside the subset
        (transform,) = props["MetricTransformations"]
        assert transform["MetricNamespace"] == "KokoroTTS/kokoro-tts"
        assert "DefaultValue" not in transform, f"{name}: an idle endpoint must publish nothing"


def test_utterance_lines_of_both_routes_feed_first_audio_and_format(
        default_synth: Synthesized, server_lines: list[str]) -> None:
    filters = deployed_filters(default_synth)
    first_audio = filters["FirstAudioMs"]
    hits = [ln for ln in server_lines if matches(first_audio["FilterPattern"], ln)]
    routes = {json.loads(ln)["route"]: json.loads(ln) for ln in hits}
    assert set(routes) == {"http", "ws"}, server_lines[-6:]
    for route, line in routes.items():
        assert line["audio_ms"] > 0 and line["first_audio_ms"] >= 0 and line["stall_ms"] >= 0, route
    selector = first_audio["MetricTransformations"][0]["MetricValue"]
    assert value(selector, hits[-1]) == json.loads(hits[-1])["first_audio_ms"]
    utterances = filters["Utterances"]
    (dimension,) = utterances["MetricTransformations"][0]["Dimensions"]
    formats = {json.loads(ln)[dimension["Value"][2:]]
               for ln in server_lines if matches(utterances["FilterPattern"], ln)}
    assert {"mp3", "wav"} <= formats
    for name in ("SynthesisMs", "StallMs"):
        assert any(matches(filters[name]["FilterPattern"], ln) for ln in hits), name


def test_only_utterances_over_the_budget_feed_the_late_count(default_synth: Synthesized,
                                                             server_lines: list[str]) -> None:
    """The alarm's count: a real utterance line is counted once its first audio exceeds the
    budget (1000 ms by default), here by raising the field of a real line past it."""
    late = deployed_filters(default_synth)["SlowFirstAudio"]
    assert late["MetricTransformations"][0]["MetricValue"] == "1"
    utterances = [json.loads(ln) for ln in server_lines if '"kokoro_metric":"utterance"' in ln]
    assert utterances
    for line in utterances:
        quick, slow = dict(line, first_audio_ms=999), dict(line, first_audio_ms=1001)
        assert not matches(late["FilterPattern"], json.dumps(quick))
        assert matches(late["FilterPattern"], json.dumps(slow))
        assert matches(late["FilterPattern"], json.dumps(line)) == (line["first_audio_ms"] > 1000)
    assert not any(matches(late["FilterPattern"], ln) for ln in server_lines if "utterance" not in ln)


def test_load_lines_feed_sessions_and_queue(default_synth: Synthesized, server_lines: list[str]) -> None:
    filters = deployed_filters(default_synth)
    for name in ("OpenSessions", "QueuedModelJobs", "RunningModelJobs"):
        props = filters[name]
        hits = [ln for ln in server_lines if matches(props["FilterPattern"], ln)]
        assert hits, f"{name}: the server wrote no load line"  # one at start-up, then each minute
        assert value(props["MetricTransformations"][0]["MetricValue"], hits[0]) >= 0
        assert not any(matches(props["FilterPattern"], ln) for ln in server_lines if "utterance" in ln)


def test_ordinary_log_lines_feed_no_metric(default_synth: Synthesized, kokoro_server: KokoroServer) -> None:  # noqa: F811
    plain = [ln for ln in kokoro_server.log.read_text(errors="replace").splitlines() if not ln.startswith("{")]
    assert plain  # uvicorn's and our own ordinary lines
    for name, props in deployed_filters(default_synth).items():
        assert not any(matches(props["FilterPattern"], ln) for ln in plain), name


def test_a_supervisor_restart_feeds_the_restart_metric(default_synth: Synthesized) -> None:
    """The real supervisor, supervising a process that dies of SIGKILL twice, then exits 0."""
    script = (
        "import os, sys, tempfile\n"
        "from kokoro_server.supervisor import Supervisor\n"
        "mark = tempfile.mktemp()\n"
        "child = ('import os, signal, sys; p = sys.argv[1]; n = len(open(p).read()) if os.path.exists(p) else 0;'\n"
        "         'open(p, \"a\").write(\"x\"); sys.exit(0) if n >= 2 else os.kill(os.getpid(), signal.SIGKILL)')\n"
        "sys.exit(Supervisor(command=[sys.executable, '-c', child, mark], env=dict(os.environ), run_as=None,\n"
        "                    backoff_s=(0.01,)).run())\n"
    )
    run = subprocess.run([str(kokoro_python()), "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=REPO, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    restart = deployed_filters(default_synth)["ContainerRestarts"]
    hits = [ln for ln in run.stdout.splitlines() if matches(restart["FilterPattern"], ln)]
    assert len(hits) == 2 and all(json.loads(ln)["reason"] == "signal SIGKILL" for ln in hits)
    assert "the serving process died" in run.stderr  # the human-readable line stays
