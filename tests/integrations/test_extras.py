"""The core never pulls a framework in: only the plugin modules import LiveKit or pipecat."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_core_and_clients_import_no_framework() -> None:
    code = ("import sys, voicestream, voicestream.chunker, voicestream.clients, voicestream.integrations, "
            "voicestream.integrations._common; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('livekit', 'pipecat')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_each_framework_is_its_own_pinned_extra() -> None:
    project = tomllib.loads((REPO / "voicestream" / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == []
    extras = project["optional-dependencies"]
    assert "livekit-agents==1.8.9" in extras["livekit"] and not any("pipecat" in d for d in extras["livekit"])
    assert "pipecat-ai==1.14.0" in extras["pipecat"] and not any("livekit" in d for d in extras["pipecat"])
    assert not any("livekit" in d or "pipecat" in d for d in extras["clients"])
