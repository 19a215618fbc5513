"""`deploy-tts say`: speak a text through a local server or the deployed endpoint, and time it.

The bidi mode sends the project's sentence chunks pipelined over one session (what the voice
agent does); the stream mode is one POST /invocations (or InvokeEndpointWithResponseStream).
Both ask for 24 kHz s16le PCM, so writing a WAV or piping to a player needs no decoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import wave
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated

import typer

from cli.aws import CliError, cli_errors, make_target
from cli.options import DEFAULT_ENDPOINT_NAME, Profile, Region
from cli.progress import err_console, out_console
from voicestream.chunker import aiter_sentences
from voicestream.clients import (
    AudioChunk,
    TtsConfigError,
    TtsConnectionError,
    TtsError,
    TtsServerError,
    TtsSession,
)
from voicestream.protocol import NATIVE_SAMPLE_RATE, SAMPLE_WIDTH, SynthesisRequest


class Mode(StrEnum):
    """How the text travels."""

    bidi = "bidi"
    stream = "stream"


@dataclass(kw_only=True)
class Timing:
    """Wall clock from before connecting to the last audio byte."""

    started: float
    first_audio: float | None = None
    finished: float | None = None
    audio_bytes: int = 0


class Player:
    """Streams PCM to the first audio player found; a thread writes, so playback never stalls reads."""

    COMMANDS: dict[str, Callable[[int], list[str]]] = {
        "aplay": lambda rate: ["aplay", "-q", "-t", "raw", "-f", "S16_LE", "-c", "1", "-r", str(rate), "-"],
        "ffplay": lambda rate: ["ffplay", "-nodisp", "-autoexit", "-loglevel", "error", "-f", "wav", "-i", "-"],
        "afplay": lambda rate: ["afplay"],  # needs a file: played once the audio is complete
    }

    def __init__(self, *, name: str, rate: int) -> None:
        self.name = name
        self._rate = rate
        self._chunks: queue.Queue[bytes | None] = queue.Queue()
        self._pcm = bytearray() if name == "afplay" else None
        self._process: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def find(cls, *, rate: int) -> Player:
        for name in cls.COMMANDS:
            if shutil.which(name):
                return cls(name=name, rate=rate)
        raise CliError("--play: no audio player found (looked for aplay, ffplay, afplay).",
                       hint="Install one (e.g. `apt-get install alsa-utils` for aplay), or use --out FILE.wav.")

    def feed(self, data: bytes) -> None:
        if self._pcm is not None:
            self._pcm += data
            return
        if self._process is None:
            self._start()
        self._chunks.put(data)

    def _start(self) -> None:
        self._process = subprocess.Popen(self.COMMANDS[self.name](self._rate), stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL)
        stdin = self._process.stdin
        assert stdin is not None
        if self.name == "ffplay":  # a WAV header of unknown length: ffplay reads to the end
            stdin.write(_wav_header(self._rate))
        self._thread = threading.Thread(target=self._write, args=(stdin,), daemon=True)
        self._thread.start()

    def _write(self, stdin: IO[bytes]) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            while (chunk := self._chunks.get()) is not None:
                stdin.write(chunk)
                stdin.flush()
        with contextlib.suppress(BrokenPipeError, OSError):
            stdin.close()

    def finish(self) -> None:
        """Wait until everything has been played."""
        if self._pcm is not None:
            if self._pcm:
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "say.wav"
                    _write_wav(path, bytes(self._pcm), self._rate)
                    subprocess.run(["afplay", str(path)], check=False)
            return
        if self._process is None:
            return
        self._chunks.put(None)
        if self._thread is not None:
            self._thread.join()
        self._process.wait()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def _wav_header(rate: int) -> bytes:
    block = SAMPLE_WIDTH
    return (b"RIFF" + (0xFFFFFFFF).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
            + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + rate.to_bytes(4, "little")
            + (rate * block).to_bytes(4, "little") + block.to_bytes(2, "little") + (16).to_bytes(2, "little")
            + b"data" + (0xFFFFFFFF).to_bytes(4, "little"))


def _write_wav(path: Path, pcm: bytes, rate: int) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(SAMPLE_WIDTH)
        out.setframerate(rate)
        out.writeframes(pcm)


def read_text(text: str | None) -> str:
    """The argument, or stdin when it is absent or '-'."""
    if text is None or text == "-":
        if sys.stdin is None or (text is None and sys.stdin.isatty()):
            raise CliError("Nothing to say.", hint='Pass the text (deploy-tts say "Hello") or pipe it on stdin.')
        text = sys.stdin.read()
    if not text.strip():
        raise CliError("Nothing to say: the text is empty.")
    return text


async def _bidi_audio(session: TtsSession, text: str, *, voice: str | None, speed: float | None,
                      rate: list[int]) -> AsyncIterator[bytes]:
    async with session:
        configured = await session.configure(voice=voice, speed=speed, format="pcm", sample_rate=NATIVE_SAMPLE_RATE)
        if configured is not None:
            rate[0] = configured.sample_rate
        async for event in session.speak_stream(aiter_sentences(text)):
            if isinstance(event, AudioChunk):
                yield event.data


AudioSource = Callable[[], AsyncIterator[bytes]]


def _source(*, text: str, url: str | None, endpoint_name: str, region: str | None, profile: str | None,
            voice: str | None, speed: float | None, mode: Mode, rate: list[int],
            endpoint_url: str | None = None) -> AudioSource:
    """PCM bytes from whichever target and mode was asked for. Imports and AWS setup happen here,
    before the clock starts; connecting happens in the returned generator, on the clock."""
    request = SynthesisRequest(text=text, voice=voice, speed=speed or 1.0)
    if url is not None:
        from voicestream.clients.local import LocalHttpTts, connect_local

        async def local() -> AsyncIterator[bytes]:
            if mode is Mode.bidi:
                async for data in _bidi_audio(await connect_local(url), text, voice=voice, speed=speed, rate=rate):
                    yield data
                return
            async with LocalHttpTts(base_url=url) as http:
                async for data in http.stream(request):
                    yield data

        return local
    target = make_target(profile=profile, region=region)
    if mode is Mode.bidi:
        from voicestream.clients.sagemaker_bidi import connect_sagemaker

        async def bidi() -> AsyncIterator[bytes]:
            session = await connect_sagemaker(endpoint_name, region=target.region, boto_session=target.session,
                                              endpoint_url=endpoint_url)
            async for data in _bidi_audio(session, text, voice=voice, speed=speed, rate=rate):
                yield data

        return bidi
    from voicestream.clients.sagemaker import SageMakerStreamingTts

    client = (target.session.client("sagemaker-runtime", region_name=target.region, endpoint_url=endpoint_url)
              if endpoint_url else target.client("sagemaker-runtime"))
    tts = SageMakerStreamingTts(endpoint_name=endpoint_name, client=client)
    return lambda: tts.stream(request)


def _explain(exc: TtsError, *, where: str, local: bool) -> CliError:
    if isinstance(exc, TtsServerError):
        if exc.code == "endpoint_not_found":
            return CliError(f"{exc.message}", hint="Deploy it with `deploy-tts deploy`, or check --endpoint-name "
                            "and --region.")
        return CliError(f"{where} refused the request: {exc.message}")
    if isinstance(exc, TtsConnectionError):
        hint = "Is the server running? `make serve` starts one on port 8080." if local else None
        return CliError(f"Lost or could not open the connection to {where}: {exc}", hint=hint)
    if isinstance(exc, TtsConfigError):
        return CliError(str(exc))
    return CliError(f"{where}: {exc}")


def say(
    text: Annotated[str | None, typer.Argument(help="Text to speak; '-' or nothing reads stdin.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="A local server's base URL, e.g. "
                                            "http://127.0.0.1:8080 (default: the deployed endpoint).")] = None,
    endpoint_name: Annotated[str, typer.Option("--endpoint-name", help="SageMaker endpoint to use without --url.")]
    = DEFAULT_ENDPOINT_NAME,
    region: Region = None,
    profile: Profile = None,
    endpoint_url: Annotated[str | None, typer.Option(
        "--endpoint-url", help="SageMaker runtime URL instead of AWS's, e.g. the stand-in's from `make "
        "sagemaker-local` (env AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME; its CA via AWS_CA_BUNDLE).")] = None,
    voice: Annotated[str | None, typer.Option("--voice", help="Voice (default: the server's).")] = None,
    speed: Annotated[float | None, typer.Option("--speed", help="Speaking rate, 0.5-2.0.")] = None,
    mode: Annotated[Mode, typer.Option("--mode", help="bidi: pipelined sentences over one session; "
                                       "stream: one request with streamed audio.")] = Mode.bidi,
    out: Annotated[Path | None, typer.Option("--out", help="Write the audio to this WAV file.")] = None,
    play: Annotated[bool, typer.Option("--play", help="Play it (aplay, ffplay or afplay).")] = False,
) -> None:
    """Speak TEXT and report time to first audio and the real-time factor."""
    with cli_errors():
        spoken = read_text(text)
        if url is not None and endpoint_url is not None:
            raise CliError("Pass --url (a local server) or --endpoint-url (a SageMaker runtime), not both.")
        where = url or f"endpoint {endpoint_name}" + (f" at {endpoint_url}" if endpoint_url else "")
        player = Player.find(rate=NATIVE_SAMPLE_RATE) if play else None
        rate = [NATIVE_SAMPLE_RATE]
        pcm = bytearray()
        source = _source(text=spoken, url=url, endpoint_name=endpoint_name, region=region, profile=profile,
                         voice=voice, speed=speed, mode=mode, rate=rate, endpoint_url=endpoint_url)
        timing = Timing(started=time.perf_counter())

        async def run() -> None:
            async for data in source():
                if timing.first_audio is None:
                    timing.first_audio = time.perf_counter()
                timing.audio_bytes += len(data)
                pcm.extend(data)
                if player is not None:
                    player.feed(data)
            timing.finished = time.perf_counter()

        try:
            asyncio.run(run())
        except TtsError as exc:
            if player is not None:
                player.stop()
            raise _explain(exc, where=where, local=url is not None) from None
        if out is not None:
            try:
                _write_wav(out, bytes(pcm), rate[0])
            except OSError as exc:
                raise CliError(f"Cannot write {out}: {exc.strerror or exc}") from None
        _report(timing, rate=rate[0], mode=mode, where=where, out=out, played=player is not None)
        if player is not None:
            player.finish()


def _report(timing: Timing, *, rate: int, mode: Mode, where: str, out: Path | None, played: bool) -> None:
    console = out_console()
    audio_s = timing.audio_bytes / (SAMPLE_WIDTH * rate)
    wall_s = (timing.finished or time.perf_counter()) - timing.started
    if timing.first_audio is None:
        raise CliError(f"{where} sent no audio.")
    console.print(f"[bold]{mode.value}[/] via {where}")
    console.print(f"  time to first audio  {timing.first_audio - timing.started:.3f} s (connecting included)")
    console.print(f"  audio                {audio_s:.2f} s ({timing.audio_bytes} bytes, {rate} Hz s16le mono)")
    console.print(f"  wall                 {wall_s:.2f} s")
    factor = audio_s / wall_s if wall_s > 0 else float("inf")
    console.print(f"  real-time factor     {factor:.2f}x (audio seconds / wall seconds; above 1 is faster "
                  "than real time)")
    if out is not None:
        console.print(f"  wrote                {out}")
    elif not played:
        err_console().print("Add --out FILE.wav to keep the audio, or --play to hear it.")
