"""Objective comparisons of two renders of the same speech (numpy only; shared by bench and tests).

* log-mel distance: mean absolute difference of 80-band log-mel spectra (1024-point FFT, 10 ms
  hop), each floored 80 dB below the louder one's peak, in dB. 0 for identical audio.
* sample jumps: |x[n+1] - x[n]|; a click at a seam is a jump larger than the audio's own.
* PESQ wideband (ITU-T P.862.2, the ``pesq`` package; 1.0-4.64, higher is closer): a perceptual
  score of a render against a reference of the same timing, both taken to 16 kHz.
"""

from __future__ import annotations

import functools

import numpy as np

SR = 24_000
N_FFT = 1024
HOP = 240
N_MELS = 80
FLOOR_DB = 80.0


@functools.lru_cache(maxsize=4)
def mel_filterbank(sr: int = SR, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    def hz_to_mel(f: float) -> float:
        return float(2595.0 * np.log10(1.0 + f / 700.0))

    def mel_to_hz(m: np.ndarray) -> np.ndarray:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2))
    bins = np.fft.rfftfreq(n_fft, 1.0 / sr)
    bank = np.zeros((n_mels, bins.size))
    for i in range(n_mels):
        low, mid, high = edges[i:i + 3]
        bank[i] = np.clip(np.minimum((bins - low) / (mid - low), (high - bins) / (high - mid)), 0.0, None)
    return bank


def log_mel(audio: np.ndarray, *, sr: int = SR) -> np.ndarray:
    x = np.asarray(audio, dtype=np.float64).reshape(-1)
    if x.size < N_FFT:
        x = np.pad(x, (0, N_FFT - x.size))
    count = 1 + (x.size - N_FFT) // HOP
    index = np.arange(N_FFT)[None, :] + HOP * np.arange(count)[:, None]
    power = np.abs(np.fft.rfft(x[index] * np.hanning(N_FFT), axis=1)) ** 2
    mel: np.ndarray = 10.0 * np.log10(np.maximum(power @ mel_filterbank(sr).T, 1e-12))
    return mel


def log_mel_distance(a: np.ndarray, b: np.ndarray, *, sr: int = SR) -> float:
    """dB; both cut to the shorter length."""
    n = min(len(a), len(b))
    if n == 0:
        raise ValueError("audio: both signals must have samples")
    ma, mb = log_mel(a[:n], sr=sr), log_mel(b[:n], sr=sr)
    top = max(ma.max(), mb.max())
    return float(np.mean(np.abs(np.maximum(ma, top - FLOOR_DB) - np.maximum(mb, top - FLOOR_DB))))


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    n = min(len(reference), len(other))
    error = np.sum((reference[:n].astype(np.float64) - other[:n]) ** 2)
    return float(10.0 * np.log10(np.sum(reference[:n].astype(np.float64) ** 2) / max(error, 1e-20)))


def jumps(audio: np.ndarray) -> np.ndarray:
    return np.abs(np.diff(np.asarray(audio, dtype=np.float64)))


def largest_jump_near(audio: np.ndarray, positions: list[int], *, radius: int) -> float:
    """The largest sample jump within ``radius`` samples of any of ``positions`` (the seams)."""
    d = jumps(audio)
    found = [d[max(0, p - radius):p + radius].max() for p in positions if p - radius < d.size]
    return float(max(found, default=0.0))


def pesq_wideband(reference: np.ndarray, other: np.ndarray, *, sr: int = SR) -> float | None:
    """PESQ wideband of ``other`` against ``reference`` (same timing, cut to the shorter); None
    when the ``pesq`` package is missing or it finds no speech to score."""
    try:
        from pesq import pesq
    except ImportError:
        return None
    n = min(len(reference), len(other))
    at_16k = np.arange(0, n, sr / 16_000)  # linear resampling: both sides alike
    ref = np.interp(at_16k, np.arange(n), reference[:n]).astype(np.float32)
    deg = np.interp(at_16k, np.arange(n), other[:n]).astype(np.float32)
    try:
        return round(float(pesq(16_000, ref, deg, "wb")), 3)
    except Exception:  # noqa: BLE001 - pesq refuses silence or noise ("no utterances detected")
        return None
