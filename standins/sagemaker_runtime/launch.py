"""Start the stand-in as a subprocess (as ``make sagemaker-local`` does) and read its ready lines.

For tests and the benchmark: fixed credentials in its environment, port 0, the CA in ``state_dir``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

READY_KEYS = ("container_url", "endpoint_url", "endpoint_name", "region", "ca_bundle")


@dataclass(frozen=True, kw_only=True)
class StandInInfo:
    """What the stand-in printed, plus everything it printed since (for checking its log)."""

    endpoint_url: str
    endpoint_name: str
    region: str
    ca_bundle: str
    container_url: str
    output: list[str] = field(default_factory=list, compare=False)


class StandInProcess:
    """``python -m standins.sagemaker_runtime --container-url URL`` with the given credentials."""

    def __init__(self, *, container_url: str, state_dir: Path, access_key_id: str, secret_access_key: str,
                 region: str = "us-east-1", endpoint_name: str = "kokoro-tts", cwd: Path | None = None) -> None:
        self._args = [sys.executable, "-m", "standins.sagemaker_runtime", "--container-url", container_url,
                      "--endpoint-name", endpoint_name, "--state-dir", str(state_dir)]
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self._env.update({"AWS_ACCESS_KEY_ID": access_key_id, "AWS_SECRET_ACCESS_KEY": secret_access_key,
                          "AWS_REGION": region, "SM_PORT": "0", "PYTHONUNBUFFERED": "1"})
        self._cwd = cwd
        self._process: subprocess.Popen[str] | None = None

    def start(self, *, timeout_s: float = 60.0) -> StandInInfo:
        self._process = process = subprocess.Popen(
            self._args, cwd=self._cwd, env=self._env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        lines: queue.Queue[str | None] = queue.Queue()
        output: list[str] = []

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                output.append(line.rstrip())
                lines.put(line.rstrip())
            lines.put(None)

        threading.Thread(target=pump, name="sagemaker-local-output", daemon=True).start()
        values: dict[str, str] = {}
        deadline = time.monotonic() + timeout_s
        while not all(k in values for k in READY_KEYS):
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise RuntimeError("the stand-in did not print its ready lines:\n" + "\n".join(output[-40:]))
            key, sep, value = line.partition("=")
            if sep and key in READY_KEYS:
                values[key] = value
        return StandInInfo(**values, output=output)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
