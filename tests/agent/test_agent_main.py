"""``python -m voice_agent`` as AgentCore and the demo run it: a process, /ping, the page."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from agent_harness import free_port
from waiting import wait_until

from voice_agent import demo


def test_module_serves_ping_and_the_page_offline() -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TTS_", "AGENT_"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "voice_agent", "--port", str(port), "--offline",
         "--tts-url", f"http://127.0.0.1:{free_port()}", "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/ping", timeout=1).status_code == 200
        except httpx.HTTPError:
            return process.poll() is not None

    try:
        assert wait_until(up, timeout=60, interval=0.3) and process.poll() is None
        assert httpx.get(f"{base}/ping").json()["status"] == "Healthy"
        page = httpx.get(f"{base}/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'id="interrupt"' in page.text and "/web/app.js" in page.text
        script = httpx.get(f"{base}/web/app.js")
        assert "__voiceStats" in script.text and "nextStartTime" in script.text
        assert httpx.get(f"{base}/web/secrets.txt").status_code == 404
    finally:
        process.send_signal(signal.SIGINT)  # as the demo stops it: one SIGINT, a clean exit
        try:
            output, _ = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    assert process.returncode == 0 and b"Traceback" not in output, output.decode(errors="replace")[-2000:]


def test_demo_refuses_a_missing_model_dir(tmp_path: Path) -> None:
    assert demo.main(["--model-dir", str(tmp_path / "nope")]) == 2
    assert demo.main(["--model-dir", str(tmp_path), "--kokoro-python", str(tmp_path / "python")]) == 2
