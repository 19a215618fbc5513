"""Codec quality: PESQ (ITU-T P.862.2 wideband, the ``pesq`` package) of each format against pcm.

The same text is requested as pcm at 16 kHz (the reference) and as each compressed format at
16 kHz and 24 kHz (the server picks a lower bitrate at 16 kHz and below), decoded with PyAV,
resampled to 16 kHz, aligned to the reference by cross-correlation (encoders add priming
samples), and scored. Higher is better (1.0-4.64). With the tiny random-weight model the audio is
noise and PESQ may refuse it: that cell is then None. The voice is the server's default unless
named (af_heart in the packaged directory); the result records it.

``make bench`` measures it inside its run (``codec_quality`` in latest.json); on its own, against a
server it starts on the packaged weights (``make bench-codecs``)::

    .venv/bin/python -m bench.codec_quality [--voice af_heart] [--out bench/results/codec_quality.json]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from .audio_metrics import pesq_wideband
from .measure import RUN_TIMEOUT_S, BenchError, Target

PESQ_RATE = 16_000
COMPRESSED = ("mp3", "aac", "opus")
RATES = (16_000, 24_000)
MAX_LAG = 4_000  # samples at 16 kHz: priming is ~1-2k


async def _fetch(client: httpx.AsyncClient, target: Target, text: str, fmt: str, rate: int, voice: str | None) -> bytes:
    body: dict[str, Any] = {"text": text, "format": fmt, "transport": "binary", "sample_rate": rate}
    if voice is not None:
        body["voice"] = voice
    response = await asyncio.wait_for(client.post(target.invocations, json=body), RUN_TIMEOUT_S)
    if response.status_code != 200:
        raise BenchError(f"POST /invocations ({fmt} at {rate} Hz): {response.status_code} {response.text[:300]}")
    return response.content


def decode_to_16k(data: bytes) -> np.ndarray:
    """Any container PyAV reads, as float32 mono at 16 kHz."""
    import av

    out: list[np.ndarray] = []
    with av.open(io.BytesIO(data), mode="r") as container:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=PESQ_RATE)
        for frame in container.decode(audio=0):
            for piece in resampler.resample(frame):
                out.append(piece.to_ndarray().reshape(-1))
        for piece in resampler.resample(None):
            out.append(piece.to_ndarray().reshape(-1))
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def align(reference: np.ndarray, degraded: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shift ``degraded`` by the lag (0..MAX_LAG, codecs only delay) that best matches the reference."""
    n = min(reference.size, degraded.size) - MAX_LAG
    if n <= PESQ_RATE // 4:
        return reference[: degraded.size], degraded[: reference.size]
    ref = reference[:n]
    scores = [float(np.dot(ref, degraded[lag:lag + n])) for lag in range(0, MAX_LAG, 8)]
    coarse = int(np.argmax(scores)) * 8
    fine = range(max(0, coarse - 8), min(MAX_LAG, coarse + 9))
    lag = max(fine, key=lambda k: float(np.dot(ref, degraded[k:k + n])))
    shifted = degraded[lag:]
    m = min(reference.size, shifted.size)
    return reference[:m], shifted[:m]


def pesq_wb(reference: np.ndarray, degraded: np.ndarray) -> float | None:
    """PESQ wideband after undoing the codec's delay (audio_metrics.pesq_wideband scores it)."""
    ref, deg = align(reference, degraded)
    return pesq_wideband(ref, deg, sr=PESQ_RATE)


async def measure(client: httpx.AsyncClient, target: Target, text: str, voice: str | None = None) -> dict[str, Any]:
    """PESQ and bitrate per format and requested sample rate, in ``voice`` (None: the server's default)."""
    if voice is None:
        listed = await client.get(f"{target.base_url}/v1/audio/voices", timeout=30)
        voice = str(listed.json().get("default")) if listed.status_code == 200 else None
    reference_pcm = await _fetch(client, target, text, "pcm", PESQ_RATE, voice)
    reference = np.frombuffer(reference_pcm, "<i2").astype(np.float32) / 32768
    seconds = reference.size / PESQ_RATE
    rows: list[dict[str, Any]] = [{"format": "pcm", "sample_rate": PESQ_RATE, "kbps": round(PESQ_RATE * 16 / 1000, 1),
                                   "pesq_wb": pesq_wb(reference, reference)}]
    for fmt in COMPRESSED:
        for rate in RATES:
            data = await _fetch(client, target, text, fmt, rate, voice)
            rows.append({"format": fmt, "sample_rate": rate, "kbps": round(len(data) * 8 / seconds / 1000, 1),
                         "pesq_wb": pesq_wb(reference, decode_to_16k(data))})
    return {"text": text, "voice": voice, "audio_s": round(seconds, 2), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    from .models import PACKAGED_DIR, classify_model_dir, kokoro_python
    from .scenario import CODEC_TEXT
    from .server import ServerProcess

    parser = argparse.ArgumentParser(prog="bench.codec_quality", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=PACKAGED_DIR)
    parser.add_argument("--voice", default=None, help="default: the server's default voice")
    parser.add_argument("--text", default=CODEC_TEXT)
    parser.add_argument("--out", type=Path, default=Path("bench/results/codec_quality.json"))
    args = parser.parse_args(argv)
    server = ServerProcess(python=kokoro_python(), model_dir=args.model_dir,
                           log_path=Path(tempfile.gettempdir()) / f"bench-codecs-{os.getpid()}.log")
    server.start()

    async def run() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=RUN_TIMEOUT_S) as client:
            return await measure(client, Target(server.url), args.text, args.voice)

    try:
        found = asyncio.run(run())
    finally:
        server.stop()
    found["model"] = classify_model_dir(args.model_dir)[0]
    for row in found["rows"]:
        print(f"{row['format']:5} {row['sample_rate']:6} Hz {row['kbps']:6} kbps  PESQ {row['pesq_wb']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {args.out} (voice {found['voice']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
