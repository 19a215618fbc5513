"""What audio looks like on the wire: Kokoro's native stream, the formats and the rates each accepts.

The one table the server's encoders, its request validation and every client read. Kokoro speaks
24 kHz mono; ``pcm`` is signed 16-bit little-endian with no header (OpenAI's ``pcm`` convention).
"""

from __future__ import annotations

import numbers
from typing import Final, Literal

from .fields import invalid

NATIVE_SAMPLE_RATE: Final = 24_000
CHANNELS: Final = 1
SAMPLE_WIDTH: Final = 2  # bytes per pcm sample: s16le
PCM_BYTES_PER_SECOND: Final = NATIVE_SAMPLE_RATE * SAMPLE_WIDTH * CHANNELS
PCM_BYTES_PER_MS: Final = PCM_BYTES_PER_SECOND // 1000
# One binary frame of a session: 200 ms of native pcm, small enough to stop fast, big enough to be cheap.
AUDIO_FRAME_BYTES: Final = PCM_BYTES_PER_SECOND // 5

FORMATS: Final = ("pcm", "wav", "mp3", "opus", "aac", "flac")
# Output rates a client may ask for; the server resamples from NATIVE_SAMPLE_RATE.
SAMPLE_RATES: Final = (8_000, 16_000, 22_050, 24_000, 44_100, 48_000)
_OPUS_RATES: Final = (8_000, 16_000, 24_000, 48_000)  # libopus runs only at 8/12/16/24/48 kHz
SUPPORTED_RATES: Final[dict[str, tuple[int, ...]]] = {
    fmt: (_OPUS_RATES if fmt == "opus" else SAMPLE_RATES) for fmt in FORMATS
}
CONTENT_TYPES: Final[dict[str, str]] = {
    "pcm": "audio/pcm",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
}

Format = Literal["pcm", "wav", "mp3", "opus", "aac", "flac"]


def check_format(value: object, *, name: str = "format") -> Format:
    if value not in FORMATS:
        raise invalid(name, f"must be one of {', '.join(FORMATS)}, got {value!r}")
    return value


def check_sample_rate(value: object, *, name: str = "sample_rate") -> int:
    if isinstance(value, bool) or value not in SAMPLE_RATES:
        rates = ", ".join(str(r) for r in SAMPLE_RATES)
        raise invalid(name, f"must be one of {rates}, got {value!r}")
    return int(value)  # 24000.0 from JSON equals 24000: the setting is an int


def check_audio_format(fmt: object, sample_rate: object) -> tuple[Format, int]:
    """A (format, sample rate) pair the encoders can produce, or a ProtocolError naming the field
    (the first bad one): the rate must suit the format (opus has fewer)."""
    if not isinstance(fmt, str):
        raise invalid("format", f"must be a string, one of {', '.join(FORMATS)}; got {fmt!r}")
    if fmt not in FORMATS:
        raise invalid("format", f"must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, numbers.Integral):
        raise invalid("sample_rate", f"must be an integer number of Hz; got {sample_rate!r}")
    rate = int(sample_rate)
    allowed = SUPPORTED_RATES[fmt]
    if rate not in allowed:
        listed = ", ".join(str(r) for r in allowed)
        raise invalid("sample_rate", f"{fmt} supports {listed} Hz; got {rate}")
    return fmt, rate  # type: ignore[return-value]
