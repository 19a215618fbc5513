"""`make demo` (voice_agent.demo) as a real process: SIGTERM and SIGHUP stop both servers as
Ctrl-C does, so the next demo finds its ports free; Ctrl-C prints no traceback; a taken port is
named."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from agent_harness import free_port
from kokoro_server_fixture import KokoroServer, kokoro_python
from waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _demo(model_dir: Path, tts_port: int, agent_port: int) -> subprocess.Popen[str]:
    """The demo in a process group of its own, as a shell runs a foreground job."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TTS_", "AGENT_"))}
    env.update(KOKORO_DEVICE="cpu", KOKORO_WARMUP="0", PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "voice_agent.demo", "--tts-port", str(tts_port), "--agent-port", str(agent_port),
         "--model-dir", str(model_dir), "--kokoro-python", str(kokoro_python()), "--offline"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )


@pytest.mark.parametrize(("signum", "said"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP"),
                                             (signal.SIGINT, "Ctrl-C")])
def test_demo_stops_both_servers_on_signal(kokoro_server: KokoroServer, signum: signal.Signals, said: str) -> None:
    """SIGINT goes to the demo's whole process group, as a terminal's Ctrl-C does: the servers it
    started must not get it twice (once from the terminal, once from the demo) and print a
    KeyboardInterrupt traceback."""
    tts_port, agent_port = free_port(), free_port()
    demo = _demo(kokoro_server.model_dir, tts_port, agent_port)
    try:
        assert wait_until(lambda: (_listening(tts_port) and _listening(agent_port)) or demo.poll() is not None,
                    timeout=240, interval=0.5)
        assert demo.poll() is None, demo.stdout.read() if demo.stdout else ""
        os.killpg(demo.pid, signum)
        output, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, output
    assert f"demo: stopping ({said})" in output
    assert "Traceback" not in output, output[-3000:]
    # Both servers are gone: nothing answers on either port, and a new demo could bind them.
    assert wait_until(lambda: not _listening(tts_port) and not _listening(agent_port), timeout=15)


def test_demo_names_the_port_that_is_taken(kokoro_server: KokoroServer) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        demo = _demo(kokoro_server.model_dir, taken, free_port())
        output, _ = demo.communicate(timeout=60)
    assert demo.returncode == 2
    assert f"port {taken} on 127.0.0.1 (for the TTS server) is already in use" in output
    assert "TTS_PORT=<port>" in output
