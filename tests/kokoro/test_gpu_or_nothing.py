"""GPU or nothing: with KOKORO_DEVICE=cuda (set by the stack on GPU instances) and no usable CUDA,
``serve`` exits with code 2 before opening its port, instead of serving slowly on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kokoro_harness import free_port

from kokoro_server.supervisor import EXIT_BAD_MODEL

pytestmark = pytest.mark.kokoro


def _serve(model_dir: Path, port: int, **env: str) -> subprocess.CompletedProcess[str]:
    # CUDA_VISIBLE_DEVICES="" hides any GPU, so the refusal is exercised on a GPU machine too.
    full_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "kokoro_server", "serve", "--model-dir", str(model_dir),
         "--host", "127.0.0.1", "--port", str(port)],
        capture_output=True, text=True, timeout=240, env=full_env,
    )


@pytest.mark.live_server
def test_torch_engine_refuses_cpu_when_cuda_was_asked_for(tiny_model: Path) -> None:
    result = _serve(tiny_model, free_port(), KOKORO_DEVICE="cuda", KOKORO_ENGINE="torch", KOKORO_WARMUP="0")
    assert result.returncode == EXIT_BAD_MODEL == 2, result.stderr[-2000:]
    assert "KOKORO_DEVICE=cuda" in result.stderr
    assert "refusing to fall back to the CPU" in result.stderr
    assert "Uvicorn running" not in result.stderr  # the port never opened, so /ping never answered


@pytest.mark.live_server
def test_a_misspelt_device_is_refused_by_name(tiny_model: Path) -> None:
    result = _serve(tiny_model, free_port(), KOKORO_DEVICE="gpu")
    assert result.returncode == EXIT_BAD_MODEL
    assert "KOKORO_DEVICE: expected cpu, cuda or cuda:N, got 'gpu'" in result.stderr
