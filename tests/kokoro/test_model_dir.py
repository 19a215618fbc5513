"""Model directory validation: every problem names the file, before anything is served."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from kokoro_server.model_dir import ModelDirError, open_model_dir, style_for

pytestmark = pytest.mark.kokoro


@pytest.fixture
def model_copy(tiny_model: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(tiny_model, target)
    return target


def test_a_valid_directory_loads_with_its_voices(tiny_model: Path) -> None:
    model = open_model_dir(tiny_model)
    assert model.engine == "torch" and model.weights.name == "kokoro-v1_0.pth"
    assert sorted(model.voices) == ["af_heart", "am_michael"]
    assert all(v.shape == (510, 1, 256) and v.dtype == np.float32 for v in model.voices.values())


def breaks(kind: str, root: Path) -> str:
    """Break ``root`` in one way; return the text the error must contain."""
    if kind == "no-dir":
        shutil.rmtree(root)
        return str(root)
    if kind == "no-config":
        (root / "config.json").unlink()
        return "config.json: missing"
    if kind == "bad-json":
        (root / "config.json").write_text("{nope")
        return "config.json: not valid JSON"
    if kind == "config-keys":
        config = json.loads((root / "config.json").read_text())
        del config["istftnet"]
        (root / "config.json").write_text(json.dumps(config))
        return "config.json: missing keys ['istftnet']"
    if kind == "bad-vocab":
        config = json.loads((root / "config.json").read_text())
        config["vocab"] = {"a": 500}
        (root / "config.json").write_text(json.dumps(config))
        return "vocab ids must be below n_token"
    if kind == "no-weights":
        (root / "kokoro-v1_0.pth").unlink()
        return "no weights found"
    if kind == "two-weights":
        shutil.copy(root / "kokoro-v1_0.pth", root / "other.pth")
        return "several .pth files"
    if kind == "no-voices":
        shutil.rmtree(root / "voices")
        return "voices: missing"
    if kind == "empty-voices":
        for path in (root / "voices").iterdir():
            path.unlink()
        return "no voice packs"
    if kind == "voice-shape":
        torch.save(torch.zeros(510, 128), root / "voices" / "af_bad.pt")
        return "af_bad.pt: voice pack has shape (510, 128), expected (510, 1, 256)"
    if kind == "voice-nan":
        pack = torch.zeros(510, 1, 256)
        pack[3, 0, 7] = float("nan")
        torch.save(pack, root / "voices" / "af_nan.pt")
        return "af_nan.pt: voice pack must hold finite"
    if kind == "voice-garbage":
        (root / "voices" / "af_junk.pt").write_bytes(b"not a tensor")
        return "af_junk.pt: cannot read voice pack"
    if kind == "bad-manifest-engine":
        (root / "manifest.json").write_text(json.dumps({"engine": "tensorflow"}))
        return "manifest.json: engine must be one of"
    raise AssertionError(kind)


KINDS = ["no-dir", "no-config", "bad-json", "config-keys", "bad-vocab", "no-weights", "two-weights",
         "no-voices", "empty-voices", "voice-shape", "voice-nan", "voice-garbage", "bad-manifest-engine"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_directory_is_refused_naming_the_file(model_copy: Path, kind: str) -> None:
    expected = breaks(kind, model_copy)
    with pytest.raises(ModelDirError) as error:
        open_model_dir(model_copy)
    assert expected in str(error.value)


def test_style_vector_is_the_row_for_the_phoneme_count(tiny_model: Path) -> None:
    pack = open_model_dir(tiny_model).voices["af_heart"]
    assert np.array_equal(style_for(pack, "abc"), pack[2])
    assert np.array_equal(style_for(pack, "x" * 900), pack[509])
    assert np.array_equal(style_for(pack, ""), pack[0])


@pytest.mark.live_server
@pytest.mark.parametrize("kind", ["no-config", "voice-shape"])
def test_serve_exits_non_zero_with_the_file_named(model_copy: Path, kind: str) -> None:
    expected = breaks(kind, model_copy)
    result = subprocess.run(
        [sys.executable, "-m", "kokoro_server", "serve", "--model-dir", str(model_copy), "--port", "1"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "cannot start" in result.stderr and expected in result.stderr
    assert "Traceback" not in result.stderr
