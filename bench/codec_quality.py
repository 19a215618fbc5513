"""Codec quality: PESQ (ITU-T P.862.2 wideband, the ``pesq`` package) of each format against pcm.

The same text is requested as pcm at 16 kHz (the reference) and as each compressed format at
16 kHz and 24 kHz (the server picks a lower bitrate at 16 kHz and below), decoded with PyAV,
resampled to 16 kHz, aligned to the reference by cross-correlation (encoders add priming
samples), and scored. Higher is better (1.0-4.64). With the tiny random-weight model the audio is
noise and PESQ may refuse it: that cell is then None.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

import httpx
import numpy as np

from .audio_metrics import pesq_wideband
from .measure import RUN_TIMEOUT_S, BenchError, Target

PESQ_RATE = 16_000
COMPRESSED = ("mp3", "aac", "opus")
RATES = (16_000, 24_000)
MAX_LAG = 4_000  # samples at 16 kHz: priming is ~1-2k


async def _fetch(client: httpx.AsyncClient, target: Target, text: str, fmt: str, rate: int) -> bytes:
    body = {"text": text, "format": fmt, "transport": "binary", "sample_rate": rate}
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


async def measure(client: httpx.AsyncClient, target: Target, text: str) -> dict[str, Any]:
    """PESQ and bitrate per format and requested sample rate."""
    reference = np.frombuffer(await _fetch(client, target, text, "pcm", PESQ_RATE), "<i2").astype(np.float32) / 32768
    seconds = reference.size / PESQ_RATE
    rows: list[dict[str, Any]] = [{"format": "pcm", "sample_rate": PESQ_RATE, "kbps": round(PESQ_RATE * 16 / 1000, 1),
                                   "pesq_wb": pesq_wb(reference, reference)}]
    for fmt in COMPRESSED:
        for rate in RATES:
            data = await _fetch(client, target, text, fmt, rate)
            rows.append({"format": fmt, "sample_rate": rate, "kbps": round(len(data) * 8 / seconds / 1000, 1),
                         "pesq_wb": pesq_wb(reference, decode_to_16k(data))})
    return {"text": text, "audio_s": round(seconds, 2), "rows": rows}
