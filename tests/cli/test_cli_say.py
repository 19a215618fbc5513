"""`deploy-tts say` with Typer's CliRunner against the REAL local Kokoro server."""

from __future__ import annotations

import asyncio
import shutil
import wave
from pathlib import Path

import pytest
from kokoro_server_fixture import KokoroServer
from typer.testing import CliRunner

from cli import deploy_tts
from voicestream.clients.local import LocalHttpTts
from voicestream.protocol import SynthesisRequest

runner = CliRunner()
TEXT = "Hello there. This is a test of the say command."


def expected_frames(server: KokoroServer, text: str, **options: object) -> int:
    """Frames of the same text over plain HTTP: durations are deterministic, so lengths match."""
    async def fetch() -> int:
        async with LocalHttpTts(base_url=server.url) as tts:
            request = SynthesisRequest(text=text, **options)  # type: ignore[arg-type]
            return sum([len(c) async for c in tts.stream(request)]) // 2
    return asyncio.run(fetch())


def read_wav(path: Path) -> tuple[int, int, int, int]:
    with wave.open(str(path), "rb") as wav:
        return wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), wav.getnframes()


@pytest.mark.parametrize("mode", ["bidi", "stream"])
def test_say_writes_a_wav_of_the_right_duration(kokoro_server: KokoroServer, tmp_path: Path, mode: str) -> None:
    out = tmp_path / "say.wav"
    result = runner.invoke(deploy_tts.app, ["say", TEXT, "--url", kokoro_server.url, "--mode", mode,
                                            "--voice", "am_michael", "--out", str(out)])
    assert result.exit_code == 0, result.output
    channels, width, rate, frames = read_wav(out)
    assert (channels, width, rate) == (1, 2, 24_000)
    assert frames == expected_frames(kokoro_server, TEXT, voice="am_michael")
    assert "time to first audio" in result.stdout and "real-time factor" in result.stdout
    assert f"{frames / rate:.2f} s" in result.stdout


def test_say_reads_stdin(kokoro_server: KokoroServer, tmp_path: Path) -> None:
    out = tmp_path / "stdin.wav"
    text = "Read from standard input."
    result = runner.invoke(deploy_tts.app, ["say", "-", "--url", kokoro_server.url, "--out", str(out)], input=text)
    assert result.exit_code == 0, result.output
    assert read_wav(out)[3] == expected_frames(kokoro_server, text)


@pytest.mark.parametrize("mode", ["bidi", "stream"])
def test_bad_voice_fails_with_the_servers_message(kokoro_server: KokoroServer, mode: str) -> None:
    result = runner.invoke(deploy_tts.app, ["say", "Hi.", "--url", kokoro_server.url, "--mode", mode,
                                            "--voice", "nobody"])
    assert result.exit_code == 1
    assert "unknown voice 'nobody'" in result.output and "Traceback" not in result.output


def test_bad_speed_fails_with_the_servers_message(kokoro_server: KokoroServer) -> None:
    result = runner.invoke(deploy_tts.app, ["say", "Hi.", "--url", kokoro_server.url, "--speed", "7"])
    assert result.exit_code == 1
    assert "between 0.5 and 2.0" in result.output


def test_server_down_is_one_clear_line() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = sock.getsockname()[1]
        for mode in ("bidi", "stream"):
            result = runner.invoke(deploy_tts.app, ["say", "Hi.", "--url", f"http://127.0.0.1:{port}",
                                                    "--mode", mode])
            assert result.exit_code == 1, result.output
            assert "Error:" in result.output and "Traceback" not in result.output
            assert "make serve" in result.output


CAT = shutil.which("cat") or "/bin/cat"  # resolved at import, before any test narrows PATH


def test_empty_text_is_refused() -> None:
    result = runner.invoke(deploy_tts.app, ["say", "-", "--url", "http://127.0.0.1:9"], input="   \n")
    assert result.exit_code == 1 and "Nothing to say" in result.output


def test_play_without_a_player_explains(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = runner.invoke(deploy_tts.app, ["say", "Hi.", "--url", "http://127.0.0.1:9", "--play"])
    assert result.exit_code == 1
    assert "no audio player found" in result.output and "--out" in result.output


def test_play_streams_pcm_to_aplay(kokoro_server: KokoroServer, monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path) -> None:
    received = tmp_path / "played.raw"
    args = tmp_path / "args.txt"
    fake = tmp_path / "aplay"
    cat = CAT
    fake.write_text(f'#!/bin/sh\necho "$@" > "{args}"\n"{cat}" > "{received}"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    result = runner.invoke(deploy_tts.app, ["say", "Play this.", "--url", kokoro_server.url, "--play"])
    assert result.exit_code == 0, result.output
    assert "-f S16_LE" in args.read_text() and "-r 24000" in args.read_text()
    assert len(received.read_bytes()) // 2 == expected_frames(kokoro_server, "Play this.")


def test_endpoint_mode_failures_are_one_line(aws: object) -> None:
    """Against moto (no such endpoint, or the operation unsupported there): a clean error either way."""
    for mode in ("stream", "bidi"):
        result = runner.invoke(deploy_tts.app, ["say", "Hi.", "--mode", mode, "--endpoint-name", "missing"])
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert lines[0].startswith("Error:") and len(lines) <= 2, result.output  # the error, maybe a hint
