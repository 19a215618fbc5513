"""A bounded soak of the Kokoro server on loopback: many concurrent sessions, many turns, random
cancels, and what must hold across all of it.

    python -m bench.soak [--sessions 32] [--turns 20] [--cancel-rate 0.25] [--seed 1]
                         [--url http://127.0.0.1:PORT --pid PID] [--model-dir DIR] [--json OUT]

Without ``--url`` it builds a tiny random-weight model (or serves ``--model-dir``) and starts the
server from the Kokoro environment (``.venv-kokoro``, or $KOKORO_PYTHON) on a free port.

Checked, and the run fails (exit 1) when one does not hold:

- no audio crosses sessions: every utterance id a session sees is one it sent, every
  ``utterance_end`` closes the utterance last started, its ``bytes`` equal the binary frames
  received between its start and end, no binary frame arrives outside an utterance, and the
  sha256 of every finished utterance's audio equals that of the same text rendered before the
  run (reference_hashes; synthesis is deterministic: the vocoder's noise is seeded by its input,
  and the soak's server decodes each chunk in one window, KOKORO_DECODER_PACE=0, so no window
  depends on timing; a server given with ``--url`` must run so too, and hand freed memory back
  soon, KOKORO_MEMORY_TRIM_AFTER_S=1, as the soak's own does);
- after a ``cancel``, no frame of the cancelled utterances follows ``cancelled``;
- every session finishes every turn (no starvation); fairness is reported as the spread of the
  sessions' mean time to first audio;
- the server's RSS (``/proc/<pid>/status``) stays flat after warm-up (``--warmup-turns`` turns of
  every session, cancels included, which grow the allocator's arenas to their working size): idle
  after the run within ``--rss-tolerance-mib`` of idle after warm-up, and the peak of the run's
  second half within the same tolerance of its first half's (a leak keeps growing; a working set
  does not);
- its file descriptors (``/proc/<pid>/fd``) and asyncio tasks (``/diagnostics`` ``tasks``) are back to
  their idle counts at the end, and it is idle (no session, job or model run).

Only the standard library, ``websockets`` and ``httpx``: it runs in either environment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from bench.soak_session import TEXTS, SoakFailure, run_session
from bench.vanish import holds, vanish
from voicestream.launch import KokoroProcess, LaunchError, build_tiny_model

REPO = Path(__file__).resolve().parents[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SoakFailure(f"no VmRSS for pid {pid}")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _ping(http: httpx.AsyncClient) -> dict[str, Any]:
    status: dict[str, Any] = (await http.get("/diagnostics")).json()
    return status


async def _wait_idle(http: httpx.AsyncClient, *, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status = await _ping(http)
    while time.monotonic() < deadline:
        # settled: the idle trim has run too, so an RSS read now is not one it is about to lower
        idle = (status["sessions"], status["queued"], status["running"], status.get("settled", True)) == (0, 0, 0, True)
        if idle:
            break
        await asyncio.sleep(0.1)
        status = await _ping(http)
    return status


async def reference_hashes(ws_url: str, *, timeout: float = 120.0) -> dict[str, str]:
    """The sha256 of each of TEXTS's pcm audio, each rendered alone in a session of its own."""
    hashes: dict[str, str] = {}
    for text in TEXTS:
        async with connect(ws_url, max_size=None, open_timeout=30) as ws:
            await ws.send(json.dumps({"type": "configure", "format": "pcm"}))
            await ws.send(json.dumps({"type": "speak", "id": "reference", "text": text}))
            await ws.send(json.dumps({"type": "flush"}))
            digest = hashlib.sha256()
            while True:
                frame = await asyncio.wait_for(ws.recv(), timeout)
                if isinstance(frame, bytes):
                    digest.update(frame)
                elif json.loads(frame).get("type") == "turn_end":
                    break
            hashes[text] = digest.hexdigest()
            await ws.send(json.dumps({"type": "close"}))
    return hashes


async def soak(*, http_url: str, pid: int, sessions: int = 32, turns: int = 20, cancel_rate: float = 0.25,
               seed: int = 1, rss_tolerance_mib: float = 64.0, turn_timeout_s: float = 120.0,
               warmup_turns: int = 2) -> dict[str, Any]:
    """Run the soak against a server already up at ``http_url`` (its process ``pid``); return the
    figures, raising SoakFailure when an invariant does not hold."""
    ws_url = http_url.replace("http://", "ws://", 1).rstrip("/") + "/invocations-bidirectional-stream"
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=http_url, timeout=10, trust_env=False) as http:
        idle = await _wait_idle(http)
        fds_before, tasks_before = fd_count(pid), idle["tasks"]
        rss_start = rss_kib(pid)
        reference = await reference_hashes(ws_url, timeout=turn_timeout_s)
        # warm-up: every session for a few turns, so allocator arenas and caches have grown
        await asyncio.gather(*(run_session(ws_url, n, warmup_turns, cancel_rate, random.Random(rng.random()),
                                        turn_timeout_s, reference) for n in range(sessions)))
        await _wait_idle(http)
        rss_warm = rss_kib(pid)
        samples: list[int] = []
        max_sessions_seen = 0

        async def sample() -> None:
            nonlocal max_sessions_seen
            while True:
                samples.append(rss_kib(pid))
                with contextlib.suppress(httpx.HTTPError):
                    max_sessions_seen = max(max_sessions_seen, (await _ping(http))["sessions"])
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        started = time.perf_counter()
        try:
            logs = await asyncio.gather(*(
                run_session(ws_url, n, turns, cancel_rate, random.Random(rng.random()), turn_timeout_s, reference)
                for n in range(sessions)))
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        elapsed = time.perf_counter() - started
        status = await _wait_idle(http)
        for _ in range(50):  # the last connections' tasks and sockets wind down
            if fd_count(pid) <= fds_before and status["tasks"] <= tasks_before:
                break
            await asyncio.sleep(0.1)
            status = await _ping(http)
        rss_end = rss_kib(pid)
        means = [statistics.fmean(log.first_audio_s) for log in logs if log.first_audio_s]
        half = len(samples) // 2
        first_half_peak = max(samples[:half] or [rss_warm])
        second_half_peak = max(samples[half:] or [rss_end])
        result: dict[str, Any] = {
            "sessions": sessions, "turns": turns, "cancel_rate": cancel_rate, "seed": seed,
            "elapsed_s": round(elapsed, 1),
            "max_concurrent_sessions": max_sessions_seen,
            "turns_done": sum(log.turns_done for log in logs),
            "utterances": sum(log.utterances for log in logs), "cancels": sum(log.cancels for log in logs),
            "audio_verified": sum(log.audio_verified for log in logs),
            "audio_mib": round(sum(log.audio_bytes for log in logs) / 2**20, 2),
            "first_audio_mean_s": {"min": round(min(means), 3), "median": round(statistics.median(means), 3),
                                   "max": round(max(means), 3)} if means else None,
            "rss_mib": {"start": round(rss_start / 1024, 1), "after_warmup": round(rss_warm / 1024, 1),
                        "max": round(max(samples + [rss_end]) / 1024, 1), "end": round(rss_end / 1024, 1),
                        "drift_after_warmup": round((rss_end - rss_warm) / 1024, 1),
                        "first_half_peak": round(first_half_peak / 1024, 1),
                        "second_half_peak": round(second_half_peak / 1024, 1)},
            "warmup_turns": warmup_turns, "rss_tolerance_mib": rss_tolerance_mib,
            "fds": {"before": fds_before, "after": fd_count(pid)},
            "tasks": {"before": tasks_before, "after": status["tasks"]},
            "idle_after": {k: status[k] for k in ("sessions", "queued", "running")},
        }
    problems = []
    if result["turns_done"] != sessions * turns:
        problems.append(f"{result['turns_done']} of {sessions * turns} turns finished")
    if result["audio_verified"] != result["utterances"] or not result["utterances"]:
        problems.append(f"{result['audio_verified']} of {result['utterances']} utterances' audio checked")
    if result["fds"]["after"] > fds_before:
        problems.append(f"file descriptors {fds_before} -> {result['fds']['after']}")
    if status["tasks"] > tasks_before:
        problems.append(f"asyncio tasks {tasks_before} -> {status['tasks']}")
    if result["idle_after"] != {"sessions": 0, "queued": 0, "running": 0}:
        problems.append(f"not idle after the soak: {result['idle_after']}")
    if (rss_end - rss_warm) / 1024 > rss_tolerance_mib:
        problems.append(f"idle RSS grew {(rss_end - rss_warm) / 1024:.1f} MiB over the run "
                        f"(tolerance {rss_tolerance_mib} MiB)")
    if (second_half_peak - first_half_peak) / 1024 > rss_tolerance_mib:
        problems.append(f"peak RSS grew {(second_half_peak - first_half_peak) / 1024:.1f} MiB from the run's first "
                        f"half to its second (tolerance {rss_tolerance_mib} MiB)")
    result["problems"] = problems
    if problems:
        raise SoakFailure("; ".join(problems) + f"\n{json.dumps(result, indent=1)}")
    return result


@contextlib.contextmanager
def _server(model_dir: Path | None, python: str) -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        if model_dir is None:
            model_dir = build_tiny_model(Path(tmp) / "tiny", python=python)
        server = KokoroProcess(model_dir=model_dir, python=python, log_path=Path(tmp) / "server.log",
                               env={"KOKORO_MAX_SESSIONS": "256", "KOKORO_DECODER_PACE": "0",
                                    "KOKORO_MEMORY_TRIM_AFTER_S": "1"})  # settled soon: RSS read then holds still
        try:
            server.start(timeout_s=300)
        except LaunchError as error:
            raise SystemExit(f"soak: {error}") from None
        try:
            yield server.url, server.pid
        finally:
            server.stop()


async def soak_then_vanish(*, http_url: str, pid: int, vanish_seconds: float, **options: Any) -> dict[str, Any]:
    """The soak, then ``vanish_seconds`` of clients leaving mid-encode (bench/vanish.py) on the same
    server: it must survive, serve a clean request in every compressed format, and go idle."""
    result = await soak(http_url=http_url, pid=pid, **options)
    if vanish_seconds > 0:
        report = await vanish(http_url=http_url, pid=pid, sessions=8, seconds=vanish_seconds,
                              seed=options.get("seed", 1))
        result["vanish"] = {**asdict(report), "crashes": 0 if report.server_alive else 1,
                            "fds_after": fd_count(pid) if report.server_alive else None}
        if not holds(report):
            raise SoakFailure(f"clients vanishing mid-encode: {json.dumps(result['vanish'])}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--cancel-rate", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rss-tolerance-mib", type=float, default=64.0)
    parser.add_argument("--warmup-turns", type=int, default=2)
    parser.add_argument("--url", help="a server already running on loopback (needs --pid)")
    parser.add_argument("--pid", type=int, help="the process id of the server at --url")
    parser.add_argument("--model-dir", type=Path, help="serve this model (default: a tiny random-weight one)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--vanish-seconds", type=float, default=0.0,
                        help="then this long of clients vanishing mid-encode (bench/vanish.py)")
    args = parser.parse_args(argv)
    python = os.environ.get("KOKORO_PYTHON", str(REPO / ".venv-kokoro" / "bin" / "python"))
    options = dict(sessions=args.sessions, turns=args.turns, cancel_rate=args.cancel_rate, seed=args.seed,
                   rss_tolerance_mib=args.rss_tolerance_mib, warmup_turns=args.warmup_turns)
    try:
        if args.url:
            if args.pid is None:
                parser.error("--url needs --pid (RSS and descriptors are read from /proc/<pid>)")
            result = asyncio.run(soak_then_vanish(http_url=args.url, pid=args.pid,
                                                  vanish_seconds=args.vanish_seconds, **options))
        else:
            with _server(args.model_dir, python) as (url, pid):
                result = asyncio.run(soak_then_vanish(http_url=url, pid=pid,
                                                      vanish_seconds=args.vanish_seconds, **options))
    except SoakFailure as failure:
        print(f"soak: FAILED: {failure}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
