"""README's examples run as written against a real server (tiny model, the shared fixture), so a
newcomer's first commands cannot rot. The OpenAI SDK example is run by
tests/kokoro/test_openai_api.py, in the environment that pins the SDK."""

from __future__ import annotations

import shlex
import subprocess
import wave
from pathlib import Path

import pytest
from kokoro_server_fixture import KokoroServer

README = Path(__file__).resolve().parents[2] / "README.md"
DOCUMENTED = "http://127.0.0.1:8080"


def block(language: str, containing: str) -> str:
    """The README's first fenced ``language`` block that contains ``containing``."""
    blocks = [b.split("```")[0] for b in README.read_text().split(f"```{language}\n")[1:]]
    found = [b for b in blocks if containing in b]
    assert found, f"README has no {language} block with {containing!r}"
    return found[0]


def test_the_python_client_example_writes_speech(kokoro_server: KokoroServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    snippet = block("python", "connect_local")
    assert DOCUMENTED in snippet
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet.replace(DOCUMENTED, kokoro_server.url), "README.md", "exec"), {})
    with wave.open(str(tmp_path / "answer.wav")) as audio:
        assert audio.getframerate() == 24000 and audio.getnframes() > 24000 // 4


def test_the_curl_examples_answer(kokoro_server: KokoroServer, tmp_path: Path) -> None:
    lines = [line for line in block("sh", "curl").splitlines() if line.startswith("curl ")]
    assert len(lines) == 2
    for line in lines:
        command = shlex.split(line.replace(DOCUMENTED, kokoro_server.url))
        subprocess.run([*command, "--fail", "--max-time", "120"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "hello.wav").read_bytes()[:4] == b"RIFF"


def test_the_plugin_example_builds_both_plugins() -> None:
    namespace: dict[str, object] = {}
    exec(compile(block("python", "KokoroTTSService"), "README.md", "exec"), namespace)
    assert {"livekit_tts", "pipecat_tts"} <= namespace.keys()
