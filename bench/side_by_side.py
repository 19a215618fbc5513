"""Our server against Kokoro-FastAPI, side by side: same machine, model, voice and client, interleaved.

    .venv/bin/python -m bench.side_by_side --kokoro-fastapi DIR --out bench/results/side_by_side-torch.json

Both servers are up at once (an idle one costs no model time), each a real uvicorn process on
loopback, driven through the OpenAI speech route (``POST /v1/audio/speech``, ``"stream": true``,
raw pcm) by one httpx streaming client, as Kokoro-FastAPI's users drive it. Each round runs every
case on both servers, the order rotating, and each ratio is the median of its rounds' own ratios
(docs/throughput.md says why). Cases:

* ``short``: 6 words (bench/design.py's), first byte, first speech and total; ``long``: 35 words
  (design's). First speech: when a real-time player that starts at the first byte plays the first
  sample above -60 dBFS (both servers leave out most of the model's silence before a sentence:
  theirs by level, ours by the model's durations, kokoro_server/lead.py);
* ``paragraph``: the agent answer's first eight sentences as one input;
* ``second_caller``: the 6-word request sent 0.3 s into a paragraph: its first byte;
* ``concurrent``: four paragraphs at once: first byte p50 and the wall time to the last byte;
* CPU: each server process's user+system time (/proc) over each case, per request and per audio
  second. Kokoro-FastAPI trims silence at the ends of its chunks (below -45 dB), so on real weights
  it sends less audio for the same text and the per-request ratio is the fair one; on the tiny
  model's noise nothing is trimmed and the two agree.

Kokoro-FastAPI is started from a checkout prepared by bench/kokoro_fastapi/setup.sh (its own venv,
its pinned dependencies, run offline against a local model directory: bench/kokoro_fastapi/README.md).
It runs torch models only, so this bench compares on a torch model directory (the tiny random-weight
one by default, ``make tiny-model``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from voicestream.launch import free_port

from .design import LONG, SHORT, plays_at_s
from .server import ServerProcess
from .throughput import paragraph

REPO = Path(__file__).resolve().parents[1]
SECOND_CALLER_AFTER_S = 0.3
CONCURRENT = 4
PCM_BYTES_PER_S = 48_000
SPEECH_DBFS = -60.0
SPEECH_LEVEL = 32767 * 10 ** (SPEECH_DBFS / 20)  # in s16le: a sample above it is the speech's start
START_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 300.0
SIDES = ("ours", "theirs")
CASES = ("short", "long", "paragraph", "second_caller", "concurrent")
#: The goals (issue 46): ours / theirs, median of the rounds' ratios, at most this.
GOALS = {"short_total": 1.0, "long_total": 1.0, "paragraph_total": 1.0, "concurrent_wall": 1.0,
         "paragraph_cpu_per_audio": 1.0}


def _stat_sum(pid: int, *indices: int) -> int:
    """The sum of /proc/PID/stat's fields at ``indices`` (counted after the command's closing
    parenthesis) over a process and its live descendants (Kokoro-FastAPI's uvicorn runs under
    start.sh); a process's figures include its threads'."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    children = {int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()}
    return sum(int(fields[i]) for i in indices) + sum(_stat_sum(child, *indices) for child in children)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds so far of a process and its live descendants."""
    return _stat_sum(pid, 11, 12) / os.sysconf("SC_CLK_TCK")


def page_faults(pid: int) -> int:
    """Page faults (minor and major) so far of a process and its live descendants: a page the
    process touches for the first time since the system got it back is one."""
    return _stat_sum(pid, 7, 9)


async def speak(client: httpx.AsyncClient, url: str, text: str, voice: str, *, delay_s: float = 0.0) -> dict[str, Any]:
    """One streamed request: seconds to the first audio byte, to the first speech a real-time
    player plays (the first sample above SPEECH_DBFS; the player starts at the first byte), and to
    the last byte, from when it was sent."""
    await asyncio.sleep(delay_s)
    body = {"model": "kokoro", "input": text, "voice": voice, "response_format": "pcm", "stream": True}
    sent = time.perf_counter()
    arrivals: list[tuple[float, int]] = []
    pcm = bytearray()
    async with client.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=REQUEST_TIMEOUT_S) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {response.status_code}: {(await response.aread())[:300]!r}")
        async for chunk in response.aiter_raw():
            if chunk:
                arrivals.append((time.perf_counter() - sent, len(chunk)))
                pcm += chunk
    if not arrivals or len(pcm) < PCM_BYTES_PER_S // 10:
        raise RuntimeError(f"{url}: {len(pcm)} bytes of audio for {text[:40]!r}")
    samples = np.frombuffer(bytes(pcm[:len(pcm) // 2 * 2]), "<i2")
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SPEECH_LEVEL)
    if not loud.size:
        raise RuntimeError(f"{url}: no sample above {SPEECH_DBFS} dBFS in the audio for {text[:40]!r}")
    speech_s = plays_at_s(arrivals, 2 * int(loud[0]))
    return {"first_s": arrivals[0][0], "speech_s": speech_s, "total_s": time.perf_counter() - sent,
            "audio_s": len(pcm) / PCM_BYTES_PER_S}


Case = Callable[[httpx.AsyncClient, str], Awaitable[dict[str, Any]]]


def cases(voice: str, text: str) -> dict[str, Case]:
    async def one(client: httpx.AsyncClient, url: str, words: str) -> dict[str, Any]:
        return await speak(client, url, words, voice)

    async def second_caller(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
        found = await asyncio.gather(speak(client, url, text, voice),
                                     speak(client, url, SHORT, voice, delay_s=SECOND_CALLER_AFTER_S))
        return found[1]

    async def concurrent(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
        began = time.perf_counter()
        found = await asyncio.gather(*(speak(client, url, text, voice) for _ in range(CONCURRENT)))
        return {"first_s": statistics.median(f["first_s"] for f in found),
                "speech_s": statistics.median(f["speech_s"] for f in found), "total_s": time.perf_counter() - began,
                "audio_s": sum(f["audio_s"] for f in found)}

    return {
        "short": lambda client, url: one(client, url, SHORT),
        "long": lambda client, url: one(client, url, LONG),
        "paragraph": lambda client, url: one(client, url, text),
        "second_caller": second_caller,
        "concurrent": concurrent,
    }


async def measure(urls: dict[str, str], pids: dict[str, int], voice: str, rounds: int,
                  log: Callable[[str], None]) -> dict[str, list[dict[str, Any]]]:
    """Every case on both sides once per round, the order rotating; each run's figures and CPU."""
    chosen = cases(voice, paragraph(8))
    runs: dict[str, list[dict[str, Any]]] = {f"{side}_{name}": [] for name in chosen for side in SIDES}
    order = [(name, side) for name in chosen for side in SIDES]
    limits = httpx.Limits(max_connections=2 * CONCURRENT, max_keepalive_connections=2 * CONCURRENT)
    async with httpx.AsyncClient(limits=limits) as client:
        for side in SIDES:  # a first request each, so neither pays its warm-up in round 1
            await speak(client, urls[side], "Warm up.", voice)
        for index in range(rounds):
            shift = index % len(order)
            turn = order[shift:] + order[:shift]
            for name, side in turn if index % 2 == 0 else turn[::-1]:
                cpu = cpu_seconds(pids[side])
                found = await chosen[name](client, urls[side])
                found["cpu_s"] = cpu_seconds(pids[side]) - cpu
                runs[f"{side}_{name}"].append(found)
                log(f"round {index + 1}/{rounds} {side} {name}: "
                    + json.dumps({k: round(v, 4) for k, v in found.items()}))
    return runs


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per side and case (the rows), and each ratio ours / theirs as the median of the
    rounds' own ratios."""
    names = [name for name in CASES if f"ours_{name}" in runs]
    rows = {name: {side: {key: round(statistics.median(r[key] for r in runs[f"{side}_{name}"]), 4)
                          for key in ("first_s", "speech_s", "total_s", "cpu_s", "audio_s")} for side in SIDES}
            for name in names}
    rounds = min(len(found) for found in runs.values())

    def paired(name: str, value: Callable[[dict[str, Any]], float]) -> float:
        return round(statistics.median(value(runs[f"ours_{name}"][i]) / value(runs[f"theirs_{name}"][i])
                                       for i in range(rounds)), 3)

    ratios = {}
    for name in names:
        ratios[f"{name}_first"] = paired(name, lambda r: float(r["first_s"]))
        ratios[f"{name}_speech"] = paired(name, lambda r: float(r["speech_s"]))
        if name != "second_caller":
            ratios[f"{name}_total" if name != "concurrent" else "concurrent_wall"] = paired(
                name, lambda r: float(r["total_s"]))
            ratios[f"{name}_cpu_per_audio"] = paired(name, lambda r: float(r["cpu_s"]) / float(r["audio_s"]))
            ratios[f"{name}_cpu"] = paired(name, lambda r: float(r["cpu_s"]))  # same text: fair where audio is trimmed
    targets = [{"ratio": name, "value": value, "at_most": GOALS.get(name),
                "met": None if name not in GOALS else value <= GOALS[name]} for name, value in ratios.items()]
    return {"rows": rows, "targets": targets, "rounds": rounds}


def start_theirs(checkout: Path, model_dir: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Kokoro-FastAPI on a free loopback port (bench/kokoro_fastapi/start.sh); waits for its /health."""
    port = free_port("127.0.0.1")
    script = REPO / "bench" / "kokoro_fastapi" / "start.sh"
    with log_path.open("wb") as log:
        process = subprocess.Popen(["bash", str(script), str(checkout), str(model_dir), str(port)],  # noqa: S603
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Kokoro-FastAPI exited ({process.returncode}); see {log_path}")
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_theirs(process)
    raise RuntimeError(f"Kokoro-FastAPI did not answer /health within {START_TIMEOUT_S:.0f} s; see {log_path}")


def stop_theirs(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to start.sh's process group (it and uvicorn), then wait, bounded."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def add_run_options(parser: argparse.ArgumentParser, *, rounds: int) -> None:
    """The options of a bench that starts servers on a model and speaks to them in rounds."""
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "bench-tiny",
                        help="a torch model directory (config.json, one .pth, voices/*.pt)")
    parser.add_argument("--voice", default="af_heart")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--python", type=Path,
                        default=Path(os.environ.get("KOKORO_PYTHON", REPO / ".venv-kokoro/bin/python")))
    parser.add_argument("--out", type=Path, required=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.side_by_side", description=__doc__.splitlines()[0])
    parser.add_argument("--kokoro-fastapi", type=Path, required=True,
                        help="a Kokoro-FastAPI checkout prepared by bench/kokoro_fastapi/setup.sh")
    add_run_options(parser, rounds=5)
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    ours = ServerProcess(python=args.python, model_dir=args.model_dir, log_path=args.out.with_suffix(".ours.log"))
    theirs: subprocess.Popen[bytes] | None = None
    began = time.monotonic()
    try:
        started = ours.start()  # /diagnostics: the decoder cost it fitted at warm-up
        theirs, theirs_url = start_theirs(args.kokoro_fastapi, args.model_dir, args.out.with_suffix(".theirs.log"))
        assert ours.process is not None
        runs = asyncio.run(measure({"ours": ours.url, "theirs": theirs_url},
                                   {"ours": ours.process.pid, "theirs": theirs.pid}, args.voice, args.rounds, log))
    finally:
        ours.stop()
        if theirs is not None:
            stop_theirs(theirs)
    record = {
        "what": "our server against Kokoro-FastAPI on the OpenAI speech route, same model, voice and client; "
                "ratios ours / theirs, medians of the rounds' own ratios",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m bench.side_by_side " + " ".join(argv if argv is not None else sys.argv[1:]),
        "kokoro_fastapi": (args.kokoro_fastapi / "VERSION").read_text().strip()
        if (args.kokoro_fastapi / "VERSION").exists() else "unknown",
        "model_dir": args.model_dir.name, "voice": args.voice, "cpus": os.cpu_count(),
        "machine": platform.machine(), "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "ours_cost_at_start": {key: started.get(key) for key in ("decoder_pace", "decoder_overhead_s")},
        "seconds": round(time.monotonic() - began, 1), **summarize(runs), "runs": runs,
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    for target in record["targets"]:
        log(f"{target['ratio']}: {target['value']}" + (f" (at most {target['at_most']})" if target["at_most"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
