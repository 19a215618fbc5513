"""``make demo``: the Kokoro server and the agent side by side on this machine, page URL printed.

The TTS server runs in its own environment (``.venv-kokoro``, torch), the agent in this one, so
they are two processes; Ctrl-C, SIGTERM and SIGHUP (a closed terminal) stop both, so the next
`make demo` finds its ports free. Without AWS credentials the agent answers with its
offline scripted model, so the demo needs no account and no network.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from voicestream.launch import KokoroProcess, LaunchError

READY_TIMEOUT_S = 180.0


def wait_ready(url: str, *, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Poll ``url`` until it answers 200; fail early if the process died meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with code {process.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url}: not ready after {timeout:.0f} s")


class Stopped(Exception):
    """SIGTERM or SIGHUP arrived: leave like Ctrl-C does, stopping both servers."""


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on ``host:port`` (binding it fails)."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def stop(process: subprocess.Popen[bytes] | subprocess.Popen[str], name: str) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        print(f"demo: {name} did not stop in 10 s; killing it", file=sys.stderr)
        process.kill()
        process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="voice_agent.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--tts-port", type=int, default=int(os.environ.get("TTS_PORT", "8080")))
    parser.add_argument("--agent-port", type=int, default=int(os.environ.get("AGENT_PORT", "8090")))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model-dir", default=os.environ.get("KOKORO_MODEL_DIR", "models/tiny"),
                        help="Kokoro model directory (make tiny-model writes a tiny one)")
    parser.add_argument("--kokoro-python", default=os.environ.get("KOKORO_PYTHON", ".venv-kokoro/bin/python"),
                        help="the Python of the Kokoro server's environment")
    parser.add_argument("--offline", action="store_true",
                        help="use the offline scripted model even with AWS credentials")
    args = parser.parse_args(argv)

    if not Path(args.model_dir).is_dir():
        print(f"demo: no model directory {args.model_dir!r}; run `make tiny-model DIR={args.model_dir}` "
              "or pass --model-dir / KOKORO_MODEL_DIR", file=sys.stderr)
        return 2
    if not Path(args.kokoro_python).exists():
        print(f"demo: {args.kokoro_python} not found; run `make install`", file=sys.stderr)
        return 2
    servers = ((args.tts_port, "the TTS server", "TTS_PORT"), (args.agent_port, "the agent", "AGENT_PORT"))
    for port, owner, flag in servers:
        if port_in_use(args.host, port):
            print(f"demo: port {port} on {args.host} (for {owner}) is already in use, perhaps by an earlier "
                  f"demo; stop that process or pick another port: make demo {flag}=<port>", file=sys.stderr)
            return 2
    tts_url = f"http://{args.host}:{args.tts_port}"
    agent_url = f"http://{args.host}:{args.agent_port}"
    tts = KokoroProcess(model_dir=Path(args.model_dir), python=args.kokoro_python, host=args.host,
                        port=args.tts_port, stop_signal=signal.SIGINT)  # SIGINT: uvicorn's graceful shutdown
    agent_cmd = [sys.executable, "-m", "voice_agent", "--host", args.host, "--port", str(args.agent_port),
                 "--tts-url", tts_url, "--page"]
    if args.offline:
        agent_cmd.append("--offline")
    agent: subprocess.Popen[bytes] | None = None
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stopped)
    try:
        tts.start(timeout_s=READY_TIMEOUT_S)
        agent = subprocess.Popen(agent_cmd, start_new_session=True)  # Ctrl-C reaches it once, from stop()
        wait_ready(f"{agent_url}/ping", process=agent, timeout=60)
        print(f"\n  Voice agent ready: open {agent_url}/  (TTS at {tts_url}; Ctrl-C stops both)\n", flush=True)
        while tts.process is not None and tts.process.poll() is None and agent.poll() is None:
            time.sleep(0.5)
        print("demo: a process exited; stopping the other", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Stopped) as exc:
        print(f"\ndemo: stopping ({str(exc) or 'Ctrl-C'})", file=sys.stderr)
        return 0
    except (RuntimeError, LaunchError) as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    finally:
        for signum in (signal.SIGTERM, signal.SIGHUP):  # a second signal must not cut the clean-up short
            signal.signal(signum, signal.SIG_IGN)
        if agent is not None:
            stop(agent, "the agent")
        tts.stop(timeout_s=10)


if __name__ == "__main__":
    sys.exit(main())
