"""Streaming encoders as a client sees them: early bytes, the right audio back, exact pcm/wav."""

from __future__ import annotations

import io
import struct

import av
import numpy as np
import numpy.typing as npt
import pytest

from kokoro_server.audio import (
    CONTENT_TYPES,
    FORMATS,
    SAMPLE_RATES,
    SUPPORTED_RATES,
    StreamEncoder,
    float_to_s16le,
    validate_format,
)

pytestmark = pytest.mark.kokoro

IN_RATE = 24000
CODECS = ("mp3", "opus", "aac", "flac")
ALL_COMBOS = [(fmt, rate) for fmt in FORMATS for rate in SUPPORTED_RATES[fmt]]
NATIVE_COMBOS = [(fmt, IN_RATE) for fmt in FORMATS]

# Decoded length may exceed the input by encoder priming plus padding to a whole codec frame
# (ADTS and headerless mp3 carry no gapless info); these are the most a client may see extra.
MP3_PRIMING = 1105  # libmp3lame: 528 + 576 + 1


def max_extra_samples(fmt: str, rate: int) -> int:
    if fmt == "mp3":
        return MP3_PRIMING + (1152 if rate >= 32000 else 576)
    if fmt == "aac":
        return 1024 + 1024
    return 0


def sine(freq: float = 440.0, seconds: float = 1.0, rate: int = IN_RATE, amp: float = 0.5,
         start: int = 0) -> npt.NDArray[np.float32]:
    n = np.arange(start, start + round(seconds * rate))
    return (amp * np.sin(2 * np.pi * freq * n / rate)).astype(np.float32)


def encode_all(fmt: str, rate: int, chunks: list[npt.NDArray[np.float32]],
               input_rate: int = IN_RATE) -> bytes:
    enc = StreamEncoder(fmt=fmt, sample_rate=rate, input_rate=input_rate)
    return b"".join(enc.encode(c) for c in chunks) + enc.finish()


def decode(data: bytes, fmt: str) -> tuple[npt.NDArray[np.float64], int, int]:
    """Decode like a client would: samples (float, mono), sample rate, channel count."""
    if fmt == "pcm":
        return np.frombuffer(data, "<i2") / 32767.0, -1, 1
    with av.open(io.BytesIO(data), mode="r") as container:
        stream = container.streams.audio[0]
        parts = []
        channels = set()
        for frame in container.decode(stream):
            channels.add(frame.layout.nb_channels)
            parts.append(_to_float(frame.to_ndarray()).reshape(-1))
        rate = stream.codec_context.sample_rate
    assert channels == {1}
    return (np.concatenate(parts) if parts else np.zeros(0)), rate, 1


def _to_float(a: npt.NDArray[np.generic]) -> npt.NDArray[np.float64]:
    scale = {np.dtype(np.int16): 32768.0, np.dtype(np.int32): 2.0**31}.get(a.dtype, 1.0)
    return a.astype(np.float64) / scale


def decoded_rate(fmt: str, rate: int) -> int:
    return 48000 if fmt == "opus" else rate  # Opus always decodes at 48 kHz (RFC 7845)


def peak_hz(x: npt.NDArray[np.float64], rate: int) -> float:
    body = x[len(x) // 8 : -len(x) // 8]  # skip codec ramp-in / ramp-out
    spec = np.abs(np.fft.rfft(body * np.hanning(len(body)), n=8 * len(body)))
    return float(np.argmax(spec) * rate / (8 * len(body)))


def rms(x: npt.NDArray[np.float64]) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


# --- constants / validation ---------------------------------------------------------------------


def test_public_tables() -> None:
    assert FORMATS == ("pcm", "wav", "mp3", "opus", "aac", "flac")
    assert SAMPLE_RATES == (8000, 16000, 22050, 24000, 44100, 48000)
    assert CONTENT_TYPES == {
        "pcm": "audio/pcm", "wav": "audio/wav", "mp3": "audio/mpeg",
        "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac",
    }
    assert SUPPORTED_RATES["opus"] == (8000, 16000, 24000, 48000)


@pytest.mark.parametrize(("fmt", "rate"), ALL_COMBOS)
def test_validate_format_accepts_supported_pairs(fmt: str, rate: int) -> None:
    assert validate_format(fmt, np.int64(rate)) == (fmt, rate)
    assert type(validate_format(fmt, np.int64(rate))[1]) is int


@pytest.mark.parametrize(
    ("fmt", "rate", "field"),
    [
        ("ogg", 24000, "format"),
        ("MP3", 24000, "format"),
        ("", 24000, "format"),
        (None, 24000, "format"),
        (3, 24000, "format"),
        ("pcm", 44000, "sample_rate"),
        ("pcm", 0, "sample_rate"),
        ("pcm", -24000, "sample_rate"),
        ("pcm", "24000", "sample_rate"),
        ("pcm", 24000.0, "sample_rate"),
        ("pcm", True, "sample_rate"),
        ("pcm", None, "sample_rate"),
        ("opus", 44100, "sample_rate"),
        ("opus", 22050, "sample_rate"),
        ("bogus", "bogus", "format"),  # the first bad field is reported
    ],
)
def test_validate_format_errors_name_the_field(fmt: object, rate: object, field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: "):
        validate_format(fmt, rate)
    with pytest.raises(ValueError, match=rf"^{field}: "):
        StreamEncoder(fmt=fmt, sample_rate=rate)  # type: ignore[arg-type]


def test_opus_rate_error_lists_what_opus_supports() -> None:
    with pytest.raises(ValueError, match="8000, 16000, 24000, 48000"):
        validate_format("opus", 44100)


@pytest.mark.parametrize("input_rate", [0, -1, 24000.0, True, "24000"])
def test_bad_input_rate_is_rejected(input_rate: object) -> None:
    with pytest.raises(ValueError, match=r"^input_rate: "):
        StreamEncoder(input_rate=input_rate)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", FORMATS)
def test_content_type_follows_format(fmt: str) -> None:
    assert StreamEncoder(fmt=fmt).content_type == CONTENT_TYPES[fmt]


# --- float_to_s16le -------------------------------------------------------------------------------


def test_float_to_s16le_clips_rounds_little_endian() -> None:
    x = np.array([0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0, np.nan, np.inf, 1 / 32767, 0.4 / 32767],
                 dtype=np.float32)
    out = float_to_s16le(x)
    expected = (0, 32767, -32767, 16384, -16384, 32767, -32767, 0, 32767, 1, 0)
    assert out == struct.pack("<11h", *expected)


def test_float_to_s16le_rejects_integers() -> None:
    with pytest.raises(TypeError, match="float"):
        float_to_s16le(np.zeros(4, dtype=np.int16))


# --- pcm / wav exactness ------------------------------------------------------------------------


def speechlike(seconds: float = 1.5) -> npt.NDArray[np.float32]:
    """Deterministic wideband signal with some samples beyond full scale (to exercise clipping)."""
    rng = np.random.default_rng(7)
    return (0.6 * rng.standard_normal(round(seconds * IN_RATE))).astype(np.float32)


def split(x: npt.NDArray[np.float32], *fractions: float) -> list[npt.NDArray[np.float32]]:
    cuts = [round(f * len(x)) for f in fractions]
    return np.split(x, cuts)


def test_pcm_is_exact_s16le_of_input() -> None:
    x = speechlike()
    assert encode_all("pcm", IN_RATE, split(x, 0.2, 0.7)) == float_to_s16le(x)


def test_wav_is_streaming_header_plus_exact_pcm() -> None:
    x = speechlike()
    data = encode_all("wav", IN_RATE, split(x, 0.3))
    assert len(data) == 44 + 2 * len(x)
    assert data[44:] == float_to_s16le(x)


@pytest.mark.parametrize("rate", SAMPLE_RATES)
def test_wav_header_fields(rate: int) -> None:
    enc = StreamEncoder(fmt="wav", sample_rate=rate)
    head = enc.encode(sine(seconds=0.1))[:44]
    riff, riff_size, wave, fmt_id, fmt_size = struct.unpack("<4sI4s4sI", head[:20])
    audio_fmt, channels, sample_rate, byte_rate, block_align, bits = struct.unpack(
        "<HHIIHH", head[20:36]
    )
    data_id, data_size = struct.unpack("<4sI", head[36:44])
    assert (riff, wave, fmt_id, data_id) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert riff_size == data_size == 0xFFFFFFFF  # length unknown while streaming
    assert (fmt_size, audio_fmt, channels, bits, block_align) == (16, 1, 1, 16, 2)
    assert (sample_rate, byte_rate) == (rate, 2 * rate)


@pytest.mark.parametrize(
    ("fmt", "header"),
    [
        ("pcm", b""), ("wav", b"RIFF"), ("mp3", b""),
        ("opus", b"OggS"), ("aac", b""), ("flac", b"fLaC"),
    ],
)
def test_stream_without_audio_is_header_only(fmt: str, header: bytes) -> None:
    enc = StreamEncoder(fmt=fmt)
    assert enc.encode(np.zeros(0, dtype=np.float32)) == b""
    data = enc.finish()
    assert data.startswith(header) and bool(data) == bool(header)
    if fmt == "wav":
        assert len(data) == 44


# --- decodes to the right audio, every format and rate --------------------------------------------


@pytest.mark.parametrize(("fmt", "rate"), ALL_COMBOS)
def test_decodes_to_right_duration_rate_and_pitch(fmt: str, rate: int) -> None:
    x = sine(440.0, seconds=1.5)
    audio, got_rate, channels = decode(encode_all(fmt, rate, [x]), fmt)
    out_rate = decoded_rate(fmt, rate)
    if fmt != "pcm":
        assert got_rate == out_rate
    assert channels == 1
    expected = len(x) * out_rate // IN_RATE
    slack = 0 if rate == IN_RATE else 2  # resampler rounding
    assert expected - slack <= len(audio) <= expected + max_extra_samples(fmt, rate) + slack
    assert peak_hz(audio, out_rate) == pytest.approx(440.0, abs=2.0)
    body = audio[len(audio) // 4 : -len(audio) // 4]
    assert rms(body) == pytest.approx(0.5 / np.sqrt(2), rel=0.1)


@pytest.mark.parametrize(("fmt", "input_rate", "rate"), [
    ("pcm", 16000, 24000), ("wav", 22050, 48000), ("mp3", 16000, 24000),
    ("opus", 44100, 48000), ("aac", 48000, 24000), ("flac", 8000, 16000),
])
def test_other_input_rates_are_resampled(fmt: str, input_rate: int, rate: int) -> None:
    x = sine(300.0, seconds=1.0, rate=input_rate)
    audio, _, _ = decode(encode_all(fmt, rate, [x], input_rate=input_rate), fmt)
    out_rate = decoded_rate(fmt, rate)
    assert len(audio) >= out_rate - 2
    assert peak_hz(audio, out_rate) == pytest.approx(300.0, abs=2.0)


@pytest.mark.parametrize("rate", SUPPORTED_RATES["opus"])
def test_opus_head_records_requested_rate(rate: int) -> None:
    data = encode_all("opus", rate, [sine(seconds=0.2)])
    head = data.index(b"OpusHead")
    version, channels, _pre_skip, input_rate = struct.unpack("<BBHI", data[head + 8 : head + 16])
    assert (version, channels, input_rate) == (1, 1, rate)


# --- streaming ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "rate"), ALL_COMBOS)
def test_first_second_is_playable_before_finish(fmt: str, rate: int) -> None:
    enc = StreamEncoder(fmt=fmt, sample_rate=rate)
    first = enc.encode(sine(seconds=1.0))
    assert first, "no bytes before finish(): the client would wait for the whole utterance"
    audio, _, _ = decode(first, fmt)
    # Held back: codec lookahead / bit reservoir (a few frames: ~0.35 s of aac/mp3 at 8 kHz,
    # where frames are long), the open 60 ms Ogg page, or the current FLAC block.
    playable_s = 0.5 if rate < 16000 else 0.75
    assert len(audio) >= playable_s * decoded_rate(fmt, rate)
    enc.finish()


@pytest.mark.parametrize(
    ("fmt", "rate"), NATIVE_COMBOS + [("mp3", 48000), ("opus", 16000), ("wav", 22050)]
)
def test_chunked_stream_is_seamless(fmt: str, rate: int) -> None:
    x = sine(440.0, seconds=2.0)
    whole, _, _ = decode(encode_all(fmt, rate, [x]), fmt)
    chunked, _, _ = decode(encode_all(fmt, rate, split(x, 0.185, 0.69)), fmt)
    # One encoder per stream: chunk boundaries never reach the codec, so the audio is identical...
    assert len(chunked) == len(whole)
    np.testing.assert_allclose(chunked, whole, atol=1e-6)
    # ...and continuous: no 10 ms window in the body is quieter than the sine (no gap, no reset).
    out_rate = decoded_rate(fmt, rate)
    win = out_rate // 100
    body = chunked[out_rate // 10 : -out_rate // 10]
    windows = body[: len(body) // win * win].reshape(-1, win)
    assert np.sqrt(np.mean(windows**2, axis=1)).min() > 0.8 * 0.5 / np.sqrt(2)


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_chunks_give_no_bytes_and_do_not_disturb(fmt: str) -> None:
    empty = np.zeros(0, dtype=np.float32)
    x = sine(seconds=0.5)
    enc = StreamEncoder(fmt=fmt)
    assert enc.encode(empty) == b""
    data = enc.encode(x) + enc.encode(empty) + enc.finish()
    assert data == encode_all(fmt, IN_RATE, [x]) or fmt == "opus"  # Ogg serials are random
    audio, _, _ = decode(data, fmt)
    assert len(audio) >= len(x) * decoded_rate(fmt, IN_RATE) // IN_RATE


@pytest.mark.parametrize("fmt", CODECS)
def test_silence_encodes_to_silence(fmt: str) -> None:
    audio, _, _ = decode(encode_all(fmt, IN_RATE, [np.zeros(IN_RATE, dtype=np.float32)]), fmt)
    assert len(audio) >= IN_RATE * decoded_rate(fmt, IN_RATE) // IN_RATE
    assert np.abs(audio).max() < 1e-3


# --- misuse --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_encoder_is_spent_after_finish(fmt: str) -> None:
    enc = StreamEncoder(fmt=fmt)
    enc.encode(sine(seconds=0.1))
    enc.finish()
    with pytest.raises(RuntimeError, match="finished"):
        enc.encode(sine(seconds=0.1))
    with pytest.raises(RuntimeError, match="finished"):
        enc.encode(np.zeros(0, dtype=np.float32))
    with pytest.raises(RuntimeError, match="finished"):
        enc.finish()


@pytest.mark.parametrize("fmt", FORMATS)
def test_close_abandons_the_stream(fmt: str) -> None:
    enc = StreamEncoder(fmt=fmt)
    enc.encode(sine(seconds=0.1))
    enc.close()
    enc.close()  # idempotent
    with pytest.raises(RuntimeError):
        enc.encode(sine(seconds=0.1))


@pytest.mark.parametrize(
    ("audio", "error"),
    [
        (np.zeros(100, dtype=np.int16), TypeError),
        (np.zeros(100, dtype=np.int32), TypeError),
        (np.zeros(100, dtype=bool), TypeError),
        (np.zeros((2, 100), dtype=np.float32), ValueError),
        (np.zeros((100, 2), dtype=np.float32), ValueError),
        (np.zeros((1, 1, 100), dtype=np.float32), ValueError),
        (np.array(0.5, dtype=np.float32), ValueError),
        (np.float32(0.5), TypeError),
        ([0.0, 0.1], TypeError),
    ],
)
@pytest.mark.parametrize("fmt", ["pcm", "mp3"])
def test_non_mono_or_non_float_input_is_rejected(
    fmt: str, audio: object, error: type[Exception]
) -> None:
    enc = StreamEncoder(fmt=fmt)
    with pytest.raises(error, match=r"^audio: "):
        enc.encode(audio)  # type: ignore[arg-type]
    # A rejected chunk leaves the stream usable.
    assert enc.encode(sine(seconds=1.0))


@pytest.mark.parametrize("shape", [(-1,), (-1, 1), (1, -1)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_single_channel_shapes_and_float_dtypes_are_converted(
    shape: tuple[int, ...], dtype: type
) -> None:
    x = sine(seconds=0.1)
    got = StreamEncoder(fmt="pcm").encode(x.astype(dtype).reshape(shape))
    assert got == float_to_s16le(x.astype(dtype).astype(np.float32))


@pytest.mark.parametrize("fmt", FORMATS)
def test_out_of_range_and_nan_samples_stay_bounded(fmt: str) -> None:
    x = sine(seconds=0.5, amp=3.0)
    x[1000:1100] = np.nan
    x[2000] = np.inf
    audio, _, _ = decode(encode_all(fmt, IN_RATE, [x]), fmt)
    assert np.isfinite(audio).all()
    assert np.abs(audio).max() <= 1.5  # clipped at full scale (lossy codecs overshoot a little)
