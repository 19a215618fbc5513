"""bench/codec_quality.py: alignment of a delayed decode, and PESQ ranking real codec damage.

The signal is a voiced-speech stand-in (a 120-220 Hz gliding harmonic tone, syllable-rate
envelope, pauses) encoded and decoded with the same PyAV codecs the server uses.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from bench.codec_quality import PESQ_RATE, align, decode_to_16k, pesq_wb


def speechlike(seconds: float = 3.0) -> np.ndarray:
    t = np.arange(int(seconds * PESQ_RATE)) / PESQ_RATE
    f0 = 170 + 50 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / PESQ_RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = np.clip(np.sin(2 * np.pi * 3.5 * t), 0, None) * (np.sin(2 * np.pi * 0.4 * t) > -0.6)
    return (0.3 * voiced * envelope / 3).astype(np.float32)


def encode(audio: np.ndarray, codec: str, fmt: str, bit_rate: int) -> bytes:
    import av

    sink = io.BytesIO()
    with av.open(sink, mode="w", format=fmt) as container:
        stream = container.add_stream(codec, rate=PESQ_RATE, layout="mono")
        assert isinstance(stream, av.AudioStream)  # an audio codec's stream
        stream.bit_rate = bit_rate
        frame = av.AudioFrame.from_ndarray(audio.reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = PESQ_RATE
        frame.pts = 0
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return sink.getvalue()


def test_align_finds_the_priming_delay() -> None:
    reference = speechlike()
    delayed = np.concatenate([np.zeros(1105, np.float32), reference])
    ref, deg = align(reference, delayed)
    np.testing.assert_array_equal(ref, deg)


def test_pesq_is_perfect_for_pcm_and_lower_for_a_starved_mp3() -> None:
    reference = speechlike()
    assert pesq_wb(reference, reference) == pytest.approx(4.64, abs=0.01)
    good = pesq_wb(reference, decode_to_16k(encode(reference, "libmp3lame", "mp3", 64_000)))
    starved = pesq_wb(reference, decode_to_16k(encode(reference, "libmp3lame", "mp3", 8_000)))
    assert good is not None and starved is not None
    assert starved < good <= 4.64
