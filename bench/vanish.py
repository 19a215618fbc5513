"""Clients that vanish or cancel while their compressed audio is being encoded.

Voice agents leave mid-utterance all the time (barge-in, a closed tab, a dropped call). Each round
opens ``sessions`` WebSocket sessions at once; each asks for mp3, opus or aac at a random rate,
speaks, reads for a random 0-400 ms, maybe cancels, changes format and speaks again, then drops
its TCP connection without a close frame. A server that frees a codec while a worker thread is
still encoding into it dies of a segfault in libavformat (issue 11): this is that reproduction,
bounded in rounds or seconds. After it, the server must still be alive, idle, and serve a clean
request in every compressed format.

    python -m bench.vanish --url http://127.0.0.1:PORT --pid PID [--seconds 300 | --rounds 20]

Only the standard library, ``websockets`` and ``httpx``: it runs in either environment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from dataclasses import asdict, dataclass

import httpx
from websockets.asyncio.client import ClientConnection, connect

FORMATS = ("mp3", "opus", "aac")
RATES = {"mp3": (16000, 24000, 48000), "opus": (16000, 24000, 48000), "aac": (16000, 24000, 48000)}
TEXT = ("The quick brown fox jumps over the lazy dog near the river bank today. "
        "A second sentence keeps the encoder busy while the first one plays. "
        "And a third one, so that a cancel lands on queued work as well.")


@dataclass
class VanishReport:
    """What one run did and what held after it."""

    rounds: int = 0
    sessions: int = 0
    vanished: int = 0  # TCP dropped without a close frame
    cancels: int = 0
    format_changes: int = 0
    audio_frames: int = 0  # binary frames clients read before leaving
    client_errors: int = 0  # a session that could not even start (refused, reset): counted, not fatal
    seconds: float = 0.0
    orphaned_jobs: int = 0  # model jobs finished for clients already gone (/diagnostics): at most one per vanished one
    server_alive: bool = True
    clean_requests_ok: bool = False
    idle_after: bool = False


async def _read(ws: ClientConnection, seconds: float, report: VanishReport, *, until_audio: bool = False) -> None:
    """Read frames for ``seconds`` (audio counted, JSON ignored); with ``until_audio``, stop at the
    first audio frame instead (the model and the encoder are then at work)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            frame = await asyncio.wait_for(ws.recv(), left)
        except (asyncio.TimeoutError, TimeoutError):
            return
        if isinstance(frame, bytes):
            report.audio_frames += 1
            if until_audio:
                return


async def _configure(ws: ClientConnection, rng: random.Random, report: VanishReport, *, first: bool) -> None:
    fmt = rng.choice(FORMATS)
    await ws.send(json.dumps({"type": "configure", "format": fmt, "sample_rate": rng.choice(RATES[fmt])}))
    if not first:
        report.format_changes += 1


async def _client(ws_url: str, rng: random.Random, report: VanishReport) -> None:
    try:
        ws = await connect(ws_url, max_size=None, open_timeout=10)
    except (OSError, asyncio.TimeoutError, TimeoutError, Exception):
        report.client_errors += 1
        return
    report.sessions += 1
    try:
        await _configure(ws, rng, report, first=True)
        await ws.send(json.dumps({"type": "speak", "text": TEXT}))
        for _ in range(rng.randint(0, 2)):  # sometimes barge in, switch format, speak again
            await _read(ws, 3.0, report, until_audio=True)
            await _read(ws, rng.uniform(0.0, 0.4), report)
            await ws.send(json.dumps({"type": "cancel"}))
            report.cancels += 1
            if rng.random() < 0.7:
                await _configure(ws, rng, report, first=False)
            await ws.send(json.dumps({"type": "speak", "text": TEXT}))
        await _read(ws, 3.0, report, until_audio=True)
        await _read(ws, rng.uniform(0.0, 0.4), report)
    except Exception:  # the server went away under us: the run's liveness check says why
        report.client_errors += 1
    finally:
        ws.transport.abort()  # vanish: no close frame, no FIN handshake wait
        report.vanished += 1


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _alive(http: httpx.AsyncClient, pid: int | None) -> bool:
    """Whether the server still runs: its process if we know it, else whether /ping answers."""
    if pid is not None:
        return process_alive(pid)
    try:
        await http.get("/ping", timeout=5)
    except httpx.HTTPError:
        return False
    return True


async def _clean_requests(http: httpx.AsyncClient) -> bool:
    """One ordinary request per compressed format still gets a complete, non-empty answer."""
    for fmt in FORMATS:
        response = await http.post("/invocations", json={"text": "Still here.", "format": fmt}, timeout=60)
        if response.status_code != 200 or not response.content:
            return False
    return True


async def _idle(http: httpx.AsyncClient, *, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = (await http.get("/ping", timeout=5)).json()
        if (status["sessions"], status["queued"], status["running"]) == (0, 0, 0):
            return True
        await asyncio.sleep(0.1)
    return False


async def vanish(
    *, http_url: str, pid: int | None, sessions: int = 8, rounds: int | None = None,
    seconds: float | None = None, seed: int = 1,
) -> VanishReport:
    """Run rounds of vanishing clients until ``rounds`` or ``seconds`` is reached (one is required)."""
    if rounds is None and seconds is None:
        raise ValueError("rounds or seconds: give at least one bound")
    ws_url = http_url.replace("http://", "ws://", 1) + "/invocations-bidirectional-stream"
    rng = random.Random(seed)
    report = VanishReport()
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=http_url) as http:
        orphaned_before = (await http.get("/diagnostics", timeout=5)).json()["orphaned_jobs"]
        while (rounds is None or report.rounds < rounds) and (seconds is None or time.monotonic() - started < seconds):
            clients = [_client(ws_url, random.Random(rng.random()), report) for _ in range(sessions)]
            await asyncio.gather(*clients)
            report.rounds += 1
            report.server_alive = await _alive(http, pid)
            if not report.server_alive:
                break
        report.seconds = round(time.monotonic() - started, 1)
        if report.server_alive:
            with contextlib.suppress(httpx.HTTPError):
                report.clean_requests_ok = await _clean_requests(http)
                report.idle_after = await _idle(http)
                report.orphaned_jobs = ((await http.get("/diagnostics", timeout=5)).json()["orphaned_jobs"]
                                        - orphaned_before)
            report.server_alive = await _alive(http, pid)
    return report


def holds(report: VanishReport) -> bool:
    return (report.server_alive and report.clean_requests_ok and report.idle_after
            and report.orphaned_jobs <= report.vanished)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vanish", description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server's base URL, http://127.0.0.1:PORT")
    parser.add_argument("--pid", type=int, default=None, help="the server's process id (liveness)")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.rounds is None and args.seconds is None:
        args.seconds = 60.0
    report = asyncio.run(vanish(http_url=args.url, pid=args.pid, sessions=args.sessions,
                                rounds=args.rounds, seconds=args.seconds, seed=args.seed))
    print(json.dumps(asdict(report), indent=2))
    return 0 if holds(report) else 1


if __name__ == "__main__":
    sys.exit(main())
