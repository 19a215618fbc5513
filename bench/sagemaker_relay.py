"""What SageMaker's HTTP/2 relay adds to time to first audio: bidi through the stand-in vs direct.

The stand-in (standins/sagemaker_runtime, started here in front of the benchmarked server) plays
SageMaker's part on this machine: TLS, HTTP/2, the AWS event stream, SigV4 on every event, the hop
to the container's WebSocket. Each round sends the same first fragment once directly over the
WebSocket and once through the real HTTP/2 SDK (``connect_sagemaker``), alternating which goes
first; both sessions are opened before timing. The difference is the relay's cost on loopback,
not AWS's network or its real relay, which only a deployed endpoint can measure.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from voicestream.clients import AudioChunk, TtsSession, UtteranceEnd

from .measure import FIRST_AUDIO_TIMEOUT_S, BenchError, Target, close_ws, open_ws, spread

ACCESS_KEY_ID = "BENCHSTANDINKEYID"
SECRET_ACCESS_KEY = "bench-stand-in-secret"
REPO = Path(__file__).resolve().parent.parent


async def _direct(ws: Any, text: str, uid: str) -> tuple[float, float]:
    """(TTFA ms from the send, the engine's time before the first audio) over the direct WebSocket."""
    sent = time.perf_counter()
    await ws.send(json.dumps({"type": "speak", "id": uid, "text": text}))
    first: float | None = None
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            first = first if first is not None else time.perf_counter()
            continue
        event = json.loads(message)
        if event.get("type") == "utterance_end":
            if first is None:
                raise BenchError("direct: utterance_end without audio")
            # model time before the first audio (with windowed decoding: the first window's)
            return (first - sent) * 1000, float(event.get("first_audio_synthesis_ms") or event["synthesis_ms"])


async def _relayed(session: TtsSession, text: str, uid: str) -> tuple[float, float]:
    """The same through the stand-in and the HTTP/2 SDK."""
    sent = time.perf_counter()
    await session.speak(text, id=uid)
    first: float | None = None
    async for event in session.events():
        if isinstance(event, AudioChunk) and first is None:
            first = time.perf_counter()
        if isinstance(event, UtteranceEnd):
            if first is None:
                raise BenchError("relayed: utterance_end without audio")
            return (first - sent) * 1000, float(getattr(event, "first_audio_synthesis_ms", 0) or event.synthesis_ms)
    raise BenchError("relayed: the session ended")


async def measure(target: Target, text: str, *, rounds: int) -> dict[str, Any]:
    """Paired samples (ms): TTFA and overhead, direct and through the stand-in, and what the relay adds.
    Each sample in a session of its own: in one session the server would count the last sample's
    audio as still playing and carry the next on from it (one window: the job sizer's rule 3).
    The AWS SDKs and the stand-in are imported here: a run with ``--no-relay`` (bench/gpu.sh on a
    machine without them) never needs them."""
    import boto3

    from standins.sagemaker_runtime.launch import StandInProcess
    from voicestream.clients.sagemaker_bidi import connect_sagemaker

    with tempfile.TemporaryDirectory(prefix="bench-sagemaker-local-") as state:
        standin = StandInProcess(container_url=target.base_url, state_dir=Path(state), cwd=REPO,
                                 access_key_id=ACCESS_KEY_ID, secret_access_key=SECRET_ACCESS_KEY)
        info = standin.start()
        boto = boto3.Session(aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
                             region_name=info.region)

        async def direct_once(uid: str) -> tuple[float, float]:
            ws = await open_ws(target)
            try:
                return await _direct(ws, text, uid)
            finally:
                await close_ws(ws)

        async def relayed_once(uid: str) -> tuple[float, float]:
            session = await connect_sagemaker(info.endpoint_name, boto_session=boto, endpoint_url=info.endpoint_url,
                                              ca_bundle=info.ca_bundle, receive_timeout=FIRST_AUDIO_TIMEOUT_S)
            try:
                await session.configure()
                return await _relayed(session, text, uid)
            finally:
                await session.close()

        direct: list[tuple[float, float]] = []
        relayed: list[tuple[float, float]] = []
        try:
            for i in range(rounds + 1):  # round 0 warms both paths and is dropped
                if i % 2:
                    d, r = await direct_once(f"d{i}"), await relayed_once(f"r{i}")
                else:
                    r, d = await relayed_once(f"r{i}"), await direct_once(f"d{i}")
                if i:
                    direct.append(d)
                    relayed.append(r)
        finally:
            standin.stop()
    # Overhead = TTFA minus the engine's own time for that utterance, so the model's variance (large
    # on a loaded machine) cancels out and what is left is transport: G2P, queueing, framing, relay.
    direct_overhead = [ttfa - synthesis for ttfa, synthesis in direct]
    relayed_overhead = [ttfa - synthesis for ttfa, synthesis in relayed]
    return {"direct_ttfa_ms": [t for t, _ in direct], "relayed_ttfa_ms": [t for t, _ in relayed],
            "direct_overhead_ms": direct_overhead, "relayed_overhead_ms": relayed_overhead,
            "added_ms": [r - d for r, d in zip(relayed_overhead, direct_overhead)]}


_SERIES = {
    "direct_ttfa": "TTFA, direct WebSocket",
    "relayed_ttfa": "TTFA, bidi via the stand-in (HTTP/2 SDK)",
    "direct_overhead": "overhead (TTFA - synthesis_ms), direct",
    "relayed_overhead": "overhead (TTFA - synthesis_ms), via the stand-in",
    "added": "added by the relay (paired overhead difference)",
}


def summarize(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    return {name: spread(raw[f"{name}_ms"], digits=2) for name in _SERIES}


def markdown(summary: dict[str, Any] | None) -> list[str]:
    if not summary:
        return []
    return ["", "## SageMaker HTTP/2 relay (stand-in on loopback, first fragment, from the send)", "",
            "| what | p50 ms | p95 ms | min | max | n |", "|---|---|---|---|---|---|",
            *[f"| {label} | {summary[name].get('p50')} | {summary[name].get('p95')} | {summary[name].get('min')} | "
              f"{summary[name].get('max')} | {summary[name].get('n')} |" for name, label in _SERIES.items()],
            "", "The stand-in is ours (TLS, HTTP/2, event stream, SigV4, WebSocket hop on this machine): AWS's own "
            "relay and network are only measured against a deployed endpoint."]
