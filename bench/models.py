"""Which model directory the benchmark serves: the packaged real weights, a given one, or a tiny
model as a loud fallback (the numbers then measure plumbing, not speed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import measure

REPO = Path(__file__).resolve().parent.parent
PACKAGED_DIR = REPO / "models" / "kokoro-82m-onnx"
TINY_DIR = REPO / "models" / "tiny"  # what `make tiny-model` writes by default


@dataclass
class ModelChoice:
    dir: Path
    kind: str
    real_weights: bool
    note: str
    temporary: bool = False

    def describe(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "temporary"}
        try:  # a path inside the repository is shown relative to it (results may be committed)
            out["dir"] = str(self.dir.resolve().relative_to(REPO))
        except ValueError:
            out["dir"] = str(self.dir)
        return out


def kokoro_python() -> Path:
    return Path(os.environ.get("KOKORO_PYTHON") or REPO / ".venv-kokoro" / "bin" / "python")


def classify_model_dir(path: Path) -> tuple[str, bool]:
    """(kind, real weights?) from what the directory holds."""
    manifest = path / "manifest.json"
    if manifest.exists():
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            data = {}
        engine = data.get("engine", "?")
        weights = data.get("weights", "?")
        return f"Kokoro-82M {engine} ({weights})", True
    config = path / "config.json"
    try:
        cfg = json.loads(config.read_text())
    except (OSError, ValueError):
        return "unknown", False
    if int(cfg.get("plbert", {}).get("hidden_size", 768)) < 768:
        return "tiny random-weight torch model (noise; NOT Kokoro's speed)", False
    return "Kokoro-82M torch (.pth)", True


def _packaged_weights_available(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", "import importlib.util,sys; "
         "sys.exit(0 if importlib.util.find_spec('kokoro_tools.packaged_weights') else 1)"],
        capture_output=True, timeout=60, check=False,
    )
    return probe.returncode == 0


def build_tiny(python: Path, reason: str) -> ModelChoice:
    workdir = Path(tempfile.mkdtemp(prefix="bench-tiny-"))
    target = workdir / "model"
    print(f"bench: building a tiny random-weight model in {target} ({reason})", flush=True)
    built = subprocess.run([str(python), "-m", "kokoro_tools.tiny_model", str(target)],
                           capture_output=True, text=True, timeout=300, check=False)
    if built.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        raise measure.BenchError(f"building the tiny model failed:\n{built.stderr[-3000:]}")
    return ModelChoice(dir=target, kind="tiny random-weight torch model (noise; NOT Kokoro's speed)",
                       real_weights=False, note=reason, temporary=True)


def choose_model(*, model_dir: str | None, quick: bool, python: Path) -> ModelChoice:
    if model_dir:
        path = Path(model_dir)
        kind, real = classify_model_dir(path)
        return ModelChoice(dir=path, kind=kind, real_weights=real, note="--model-dir")
    if quick:
        if (TINY_DIR / "config.json").exists() and classify_model_dir(TINY_DIR)[1] is False:
            return ModelChoice(dir=TINY_DIR, kind=classify_model_dir(TINY_DIR)[0], real_weights=False,
                               note="--quick uses the tiny model in models/tiny")
        return build_tiny(python, "--quick uses a tiny model")
    if (PACKAGED_DIR / "manifest.json").exists():
        kind, real = classify_model_dir(PACKAGED_DIR)
        return ModelChoice(dir=PACKAGED_DIR, kind=kind, real_weights=real, note="default packaged weights")
    if _packaged_weights_available(python):
        print(f"bench: building {PACKAGED_DIR} with kokoro_tools.packaged_weights", flush=True)
        built = subprocess.run([str(python), "-m", "kokoro_tools.packaged_weights", str(PACKAGED_DIR)],
                               capture_output=True, text=True, timeout=600, check=False)
        if built.returncode == 0 and (PACKAGED_DIR / "manifest.json").exists():
            kind, real = classify_model_dir(PACKAGED_DIR)
            return ModelChoice(dir=PACKAGED_DIR, kind=kind, real_weights=real, note="packaged weights, built now")
        return build_tiny(python, "FALLBACK: building the packaged weights failed: "
                          + (built.stderr.strip().splitlines() or ["?"])[-1])
    return build_tiny(python, "FALLBACK: no real weights (models/kokoro-82m-onnx missing and "
                      "kokoro_tools.packaged_weights unavailable)")


# --------------------------------------------------------------------------------------------
# The machine
