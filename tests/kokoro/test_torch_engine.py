"""The torch engine loads strictly: a checkpoint that does not match never loads silently."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from kokoro_server.engines import EngineError, load_engine
from kokoro_server.engines.torch_engine import _seed, build_kmodel, fold_weight_norm, load_checkpoint_strictly
from kokoro_server.model_dir import ModelDirError, open_model_dir, style_for

pytestmark = pytest.mark.kokoro


def rewrite_checkpoint(root: Path, change) -> None:
    path = root / "kokoro-v1_0.pth"
    checkpoint = torch.load(path, weights_only=True)
    change(checkpoint)
    torch.save(checkpoint, path)


def drop_key(checkpoint: dict) -> None:
    del checkpoint["decoder"][next(iter(checkpoint["decoder"]))]


def add_key(checkpoint: dict) -> None:
    checkpoint["predictor"]["surprise.weight"] = torch.zeros(3)


def reshape_key(checkpoint: dict) -> None:
    key = next(k for k, v in checkpoint["bert_encoder"].items() if v.ndim == 2)
    checkpoint["bert_encoder"][key] = torch.zeros(7, 7)


def drop_component(checkpoint: dict) -> None:
    del checkpoint["text_encoder"]


def prefix_module(checkpoint: dict) -> None:
    for name, state in list(checkpoint.items()):
        checkpoint[name] = {f"module.{key}": value for key, value in state.items()}


CASES = [
    (drop_key, "component 'decoder' does not match config.json: 1 missing keys"),
    (add_key,
     "component 'predictor' does not match config.json: 0 missing keys [], 1 unexpected keys ['surprise.weight']"),
    (reshape_key, "has shape (7, 7), config.json implies"),
    (drop_component, "components missing ['text_encoder']"),
]


@pytest.mark.parametrize(("change", "message"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_a_mismatched_checkpoint_is_refused(tiny_model: Path, tmp_path: Path, change, message) -> None:
    root = tmp_path / "model"
    shutil.copytree(tiny_model, root)
    rewrite_checkpoint(root, change)
    with pytest.raises(ModelDirError) as error:
        load_engine(open_model_dir(root))
    assert "kokoro-v1_0.pth" in str(error.value) and message in str(error.value)


def test_dataparallel_prefixes_load_to_the_same_model(tiny_model: Path, tmp_path: Path) -> None:
    root = tmp_path / "model"
    shutil.copytree(tiny_model, root)
    rewrite_checkpoint(root, prefix_module)
    plain, prefixed = load_engine(open_model_dir(tiny_model)), load_engine(open_model_dir(root))
    model = open_model_dir(tiny_model)
    style = style_for(model.voices["af_heart"], "həlˈO")
    assert np.array_equal(plain.synthesize("həlˈO", style, 1.0).audio, prefixed.synthesize("həlˈO", style, 1.0).audio)


def test_synthesis_is_deterministic_and_speed_scales_duration(tiny_model: Path) -> None:
    model = open_model_dir(tiny_model)
    engine = load_engine(model)
    phonemes = "ðɪs ɪz ɐ tˈɛst."
    style = style_for(model.voices["af_heart"], phonemes)
    first, again = engine.synthesize(phonemes, style, 1.0), engine.synthesize(phonemes, style, 1.0)
    assert first.audio.dtype == np.float32 and first.audio.ndim == 1
    assert np.array_equal(first.audio, again.audio)
    assert first.durations is not None and first.durations.sum() > 0
    assert len(engine.synthesize(phonemes, style, 2.0).audio) < len(first.audio)


@pytest.mark.parametrize("phonemes", ["", "a" * 511])
def test_out_of_range_phonemes_raise_engine_error(tiny_model: Path, phonemes: str) -> None:
    model = open_model_dir(tiny_model)
    with pytest.raises(EngineError):
        load_engine(model).synthesize(phonemes, model.voices["af_heart"][0], 1.0)


def _kokoros_own(model) -> torch.nn.Module:
    kmodel = build_kmodel(model.config)
    load_checkpoint_strictly(kmodel, model.weights)
    return kmodel.eval()


def test_the_engine_speaks_every_sample_as_kokoros_own_kmodel_does(tiny_model: Path) -> None:
    """Its own front, the harmonic source made once per chunk and the weights folded once at load
    change no sample of what KModel's forward (weight-norm hooks and all) says, seeded alike."""
    model = open_model_dir(tiny_model)
    phonemes = "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst sˈɛntəns, sˈoʊ ɪt hɐz sˈɛvɹəl wˈɪndoʊz tə dɪkˈoʊd."
    style = style_for(model.voices["af_heart"], phonemes)
    ours = load_engine(model).synthesize(phonemes, style, 1.0).audio
    kmodel = _kokoros_own(model)  # built before seeding: building draws random weights
    torch.manual_seed(_seed(phonemes, 1.0))
    with torch.inference_mode():
        theirs = kmodel(phonemes, torch.from_numpy(style).reshape(1, -1), 1.0)
    np.testing.assert_array_equal(ours, theirs.numpy().reshape(-1))


def test_weight_norm_is_folded_once_and_the_layers_compute_what_the_hooks_did(tiny_model: Path) -> None:
    kmodel = _kokoros_own(open_model_dir(tiny_model))
    conv = kmodel.decoder.generator.conv_post
    with torch.inference_mode():
        x = torch.randn(1, conv.in_channels, 12)
        hooked = conv(x)
        assert fold_weight_norm(kmodel) > 40  # the decoder alone has 46 such layers
        assert fold_weight_norm(kmodel) == 0
        np.testing.assert_array_equal(conv(x).numpy(), hooked.numpy())
    assert not hasattr(conv, "weight_v") and isinstance(conv.weight, torch.nn.Parameter)
