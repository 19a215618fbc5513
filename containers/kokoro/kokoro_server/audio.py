"""Streaming audio encoders: Kokoro's float32 chunks in, bytes a client can play as they arrive out.

The model yields one float32 mono chunk per sentence (24 kHz, values in [-1, 1]); a response must
start playing before the last sentence is synthesized, so each format is written as a *stream*:
no container field is back-filled at the end and every ``encode()`` returns whatever bytes are
ready. One :class:`StreamEncoder` lives for one response (utterance stream), so codec priming
and frame buffering happen once per stream and chunk boundaries are seamless.

Formats (``fmt``), what is on the wire, and the sample rates each accepts:

========  =======================================================  ===========================
fmt       wire format                                              sample_rate (Hz)
========  =======================================================  ===========================
pcm       raw s16le mono, no header (OpenAI's default)             8000 16000 22050 24000
                                                                   44100 48000
wav       44-byte RIFF header with RIFF/data sizes 0xFFFFFFFF      all six
          (length unknown while streaming), then s16le mono
mp3       MPEG audio frames (libmp3lame), no ID3/Xing tag          all six
opus      Ogg Opus (libopus), 60 ms pages                          8000 16000 24000 48000
aac       AAC-LC in ADTS frames                                    all six
flac      native FLAC stream, STREAMINFO without length/MD5        all six
========  =======================================================  ===========================

Why ADTS for aac: every ADTS frame carries its own header, so a player can start decoding at
the first byte that arrives, with no init segment, seeks or trailer; browsers play
``audio/aac`` ADTS from a progressive HTTP response and ffmpeg reads it from a pipe. fMP4
would add an init segment, per-fragment boxes and a choice of fragment duration for no gain
on a single audio track. (Media Source Extensions want fMP4; that would be a new format.)

Opus always decodes at 48 kHz (RFC 7845); ``sample_rate`` sets the encoder's internal rate
(bandwidth), which is recorded in the OpusHead as the input sample rate.

pcm and wav at the input rate are plain numpy (``float_to_s16le``): no codec, exact bytes.
Other rates go through PyAV's ``AudioResampler`` (FFmpeg swresample), which is streaming and
gives the same samples however the input is chunked.

Bit rates: mp3 and aac 64 kbit/s (32 at 8/16 kHz); opus 48 kbit/s VBR (32 at 8/16 kHz) plus
~4 kbit/s of Ogg pages; flac lossless and variable; pcm/wav 16 bit x rate.

Cost, measured (av 18.1.0, one x86 core, 24 kHz input; median time of ``encode()`` of one
100 ms chunk in a running stream, by output rate):

========  ========  ========  ========
fmt       16 kHz    24 kHz    48 kHz
========  ========  ========  ========
pcm/wav   0.06 ms   0.016 ms  0.07 ms
mp3       0.40 ms   0.54 ms   0.93 ms
opus      0.34 ms   0.36 ms   0.35 ms
aac       0.49 ms   0.34 ms   0.98 ms
flac      0.06 ms   0.065 ms  0.11 ms
========  ========  ========  ========

Creating an encoder costs 0.3-4 ms and ``finish()`` under 2 ms.

An encoder has one user at a time: a second concurrent ``encode`` raises instead of corrupting the
codec, and ``close()`` from another thread is deferred until the encode in flight returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from fractions import Fraction
from typing import Final

import av
import numpy as np
import numpy.typing as npt

from voicestream.protocol import (
    CONTENT_TYPES,
    FORMATS,
    NATIVE_SAMPLE_RATE,
    SAMPLE_RATES,
    SUPPORTED_RATES,
    check_audio_format,
)

from .exclusive import Exclusive, ExclusiveClosed

__all__ = [
    "CONTENT_TYPES",
    "FORMATS",
    "SAMPLE_RATES",
    "SUPPORTED_RATES",
    "StreamEncoder",
    "float_to_s16le",
    "validate_format",
]

# The format/rate table and the native rate are the protocol's (voicestream.protocol.audio).

_S16_SCALE: Final[float] = 32767.0
_UNKNOWN_SIZE: Final[int] = 0xFFFFFFFF


def validate_format(fmt: object, sample_rate: object) -> tuple[str, int]:
    """Check a requested (format, sample rate) pair before any audio is produced.

    Raises ProtocolError (a ValueError) whose ``field`` names the offending field and whose
    message starts with it (``format:`` or ``sample_rate:``).
    """
    return check_audio_format(fmt, sample_rate)


def float_to_s16le(audio: npt.NDArray[np.floating]) -> bytes:
    """Float samples to s16le bytes: clip to [-1, 1], scale by 32767, round to nearest.

    32767 (not 32768) keeps +1.0 and -1.0 symmetric and unclipped; NaN becomes silence.
    Any shape is accepted and written in C order (so interleaved stereo stays interleaved).
    """
    if not isinstance(audio, np.ndarray):
        raise TypeError(f"audio: expected a numpy array, got {type(audio).__name__}")
    if not np.issubdtype(audio.dtype, np.floating):
        raise TypeError(f"audio: expected float samples in [-1, 1], got dtype {audio.dtype}")
    return _s16le(audio.reshape(-1))


def _s16le(samples: npt.NDArray[np.floating]) -> bytes:
    scaled = np.clip(samples, -1.0, 1.0).astype(np.float32, copy=False)
    np.nan_to_num(scaled, copy=False, nan=0.0)
    scaled *= _S16_SCALE
    np.rint(scaled, out=scaled)
    data: bytes = scaled.astype("<i2").tobytes()
    return data


def _as_mono_float32(audio: object) -> npt.NDArray[np.float32]:
    """Normalise one input chunk to a contiguous 1-D float32 array, or say clearly why not.

    Float16/64 are converted; (n, 1) and (1, n) are squeezed. Integer arrays are rejected
    because their scale (int16 full-scale? already [-1, 1]?) cannot be guessed safely.
    """
    if not isinstance(audio, np.ndarray):
        raise TypeError(f"audio: expected a numpy array, got {type(audio).__name__}")
    if not np.issubdtype(audio.dtype, np.floating):
        raise TypeError(f"audio: expected float samples in [-1, 1], got dtype {audio.dtype}")
    if audio.ndim == 2 and 1 in audio.shape:
        audio = audio.reshape(-1)
    if audio.ndim != 1:
        raise ValueError(f"audio: expected mono (1-D) samples, got shape {audio.shape}")
    return np.ascontiguousarray(audio, dtype=np.float32)


class _ByteSink:
    """Write-only file object for PyAV: collects what the muxer writes until it is drained.

    It deliberately has no ``seek``/``tell``, so FFmpeg sees a non-seekable output (like a
    socket) and never plans to go back and patch headers it has already handed out.
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


_WAV_HEADER_BYTES = 44  # what _wav_header writes: RIFF, fmt (16 bytes of format), data


def _wav_header(sample_rate: int) -> bytes:
    """RIFF/WAVE header for s16 mono of unknown length (sizes 0xFFFFFFFF, as ffmpeg streams it)."""
    return (
        b"RIFF"
        + struct.pack("<I", _UNKNOWN_SIZE)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", _UNKNOWN_SIZE)
    )


def sized_file(fmt: str, data: bytes) -> bytes:
    """A whole streamed response as a file whose length is known: a WAV's RIFF and data sizes
    filled in (streamed, they say 0xFFFFFFFF); every other format is already a complete file."""
    if fmt != "wav" or len(data) < _WAV_HEADER_BYTES or data[:4] != b"RIFF":
        return data
    return (data[:4] + struct.pack("<I", len(data) - 8) + data[8:40]
            + struct.pack("<I", len(data) - _WAV_HEADER_BYTES) + data[_WAV_HEADER_BYTES:])


class _PcmBackend:
    """pcm/wav: numpy only at the input rate; swresample (float) when the rate changes."""

    def __init__(self, *, fmt: str, sample_rate: int, input_rate: int) -> None:
        self._header = _wav_header(sample_rate) if fmt == "wav" else b""
        self._input_rate = input_rate
        self._resampler = (
            av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
            if sample_rate != input_rate
            else None
        )
        self._pts = 0

    def _take_header(self) -> bytes:
        header, self._header = self._header, b""
        return header

    def encode(self, samples: npt.NDArray[np.float32]) -> bytes:
        if self._resampler is None:
            return self._take_header() + _s16le(samples)  # clips and zeroes NaN itself
        frame = _frame(_bounded(samples), self._input_rate, self._pts)
        self._pts += samples.size
        return self._take_header() + self._convert(self._resampler.resample(frame))

    def finish(self) -> bytes:
        tail = b"" if self._resampler is None else self._convert(self._resampler.resample(None))
        return self._take_header() + tail

    def close(self) -> None:
        self._resampler = None  # swresample's context is freed with it; no bytes owed

    @staticmethod
    def _convert(frames: list[av.AudioFrame]) -> bytes:
        return b"".join(_s16le(np.asarray(f.to_ndarray(), np.float32).reshape(-1)) for f in frames)


# Per codec: (muxer, encoder, bit rate at <= 16 kHz, bit rate above, muxer options).
# flush_packets=1: every muxed packet reaches the sink at once, never waiting in AVIO's buffer.
_CODECS: Final[dict[str, tuple[str, str, int, int, dict[str, str]]]] = {
    # No ID3v2 tag and no Xing frame: the Xing frame counts would be wrong (unknown length).
    "mp3": ("mp3", "libmp3lame", 32000, 64000, {"id3v2_version": "0", "write_xing": "0"}),
    # Ogg holds a page until it spans page_duration (default 1 s, i.e. nothing comes out of a
    # 1 s sentence): 60 ms bounds what is held back at ~3.7 kbit/s of page headers.
    "opus": ("ogg", "libopus", 32000, 48000, {"page_duration": "60000"}),
    "aac": ("adts", "aac", 32000, 64000, {}),
    # The default 8 KiB PADDING block only serves rewriting STREAMINFO later, which we never do.
    "flac": ("flac", "flac", 0, 0, {"metadata_header_padding": "0"}),
}


def _bounded(samples: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Clip to [-1, 1] and zero NaN before a filter or codec, where they would spread or wrap."""
    bounded = np.clip(samples, -1.0, 1.0)
    if not np.isfinite(samples).all():
        np.nan_to_num(bounded, copy=False, nan=0.0)
    return bounded


def _frame(samples: npt.NDArray[np.float32], rate: int, pts: int) -> av.AudioFrame:
    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="flt", layout="mono")
    frame.sample_rate = rate
    frame.time_base = Fraction(1, rate)
    frame.pts = pts
    return frame


class _CodecBackend:
    """mp3/opus/aac/flac through PyAV: encoder + muxer writing to a non-seekable byte sink.

    PyAV's stream.encode resamples (rate, sample format) and re-frames to the codec's frame size
    with one resampler per stream, so chunk boundaries never reach the codec.
    """

    def __init__(self, *, fmt: str, sample_rate: int, input_rate: int) -> None:
        muxer, codec, low_rate, high_rate, options = _CODECS[fmt]
        self._sink = _ByteSink()
        self._input_rate = input_rate
        self._pts = 0
        self._container = av.open(
            self._sink,
            mode="w",
            format=muxer,
            container_options={"flush_packets": "1", **options},
        )
        stream = self._container.add_stream(codec, rate=sample_rate, layout="mono")
        if not isinstance(stream, av.AudioStream):  # narrows the type; PyAV returns a union
            raise TypeError(f"{codec} did not give an audio stream")
        self._stream = stream
        bit_rate = low_rate if sample_rate <= 16000 else high_rate
        if bit_rate:
            self._stream.bit_rate = bit_rate
        # Open the codec and write the header now, so a bad setting fails before any audio.
        self._container.start_encoding()

    def encode(self, samples: npt.NDArray[np.float32]) -> bytes:
        frame = _frame(_bounded(samples), self._input_rate, self._pts)
        self._pts += samples.size
        self._container.mux(self._stream.encode(frame))
        return self._sink.drain()

    def finish(self) -> bytes:
        try:
            self._container.mux(self._stream.encode(None))
        finally:
            self._container.close()
        return self._sink.drain()

    def close(self) -> None:
        with contextlib.suppress(av.FFmpegError):  # nobody reads the trailer of an abandoned stream
            self._container.close()
        self._sink.drain()


class StreamEncoder:
    """One response's audio stream: ``encode()`` each chunk, send what it returns, ``finish()``.

    ``fmt``/``sample_rate`` are validated with :func:`validate_format`; ``input_rate`` is the
    rate of the chunks passed in (Kokoro: 24000).
    """

    content_type: str
    fmt: str
    sample_rate: int
    input_rate: int

    def __init__(
        self, *, fmt: str = "pcm", sample_rate: int = NATIVE_SAMPLE_RATE, input_rate: int = NATIVE_SAMPLE_RATE
    ) -> None:
        self.fmt, self.sample_rate = validate_format(fmt, sample_rate)
        if (
            isinstance(input_rate, bool)
            or not isinstance(input_rate, (int, np.integer))
            or not 1000 <= input_rate <= 384000
        ):
            raise ValueError(
                f"input_rate: must be an integer in [1000, 384000] Hz; got {input_rate!r}"
            )
        self.input_rate = int(input_rate)
        self.content_type = CONTENT_TYPES[self.fmt]
        backend_type = _PcmBackend if self.fmt in ("pcm", "wav") else _CodecBackend
        backend = backend_type(fmt=self.fmt, sample_rate=self.sample_rate, input_rate=self.input_rate)
        self._backend: Exclusive[_PcmBackend | _CodecBackend] = Exclusive(
            backend, close=lambda b: b.close(), name=f"StreamEncoder({self.fmt})"
        )

    @property
    def closed(self) -> bool:
        """True once finished or closed (or a close waits for the encode in flight)."""
        return self._backend.closed

    @property
    def busy(self) -> bool:
        """True while an ``encode``/``finish`` runs (in some thread)."""
        return self._backend.busy

    def encode(self, audio: npt.NDArray[np.floating]) -> bytes:
        """Encode one float mono chunk; return the bytes ready now (b"" while a frame fills up).

        Samples outside [-1, 1] are clipped and NaN/inf are made finite, because codecs would
        otherwise wrap or emit garbage. Raises TypeError/ValueError for non-float or non-mono
        input and RuntimeError after ``finish()``.
        """
        samples = _as_mono_float32(audio)
        if samples.size == 0:
            if self._backend.closed:
                raise ExclusiveClosed(f"StreamEncoder({self.fmt}): already finished or closed")
            return b""
        return self._backend.use(lambda backend: backend.encode(samples))

    def finish(self) -> bytes:
        """Flush the codec's buffered frames and the container trailer; the encoder is then spent.

        With no audio encoded it returns the format's header alone (wav, ogg, flac) or b"" (pcm,
        mp3, aac have none), so an empty utterance is still a well-formed response.
        """
        return self._backend.use(lambda backend: backend.finish(), last=True)

    def close(self) -> None:
        """Abandon the stream (client went away): free the codec without producing more bytes.

        Safe from any thread at any time: if an ``encode`` is running in a worker thread, the codec
        is freed by that thread when the encode returns, never under it (see exclusive.py)."""
        self._backend.close()


async def encode_off_loop(encoder: StreamEncoder, audio: npt.NDArray[np.floating]) -> bytes:
    """``encoder.encode`` without stalling the event loop: codecs cost ~0.5 ms per 100 ms of audio,
    so a long sentence runs in a thread; plain PCM at the native rate is cheaper than the hop."""
    if encoder.fmt in ("pcm", "wav") and encoder.sample_rate == encoder.input_rate:
        return encoder.encode(audio)
    return await asyncio.to_thread(encoder.encode, audio)
