"""The torch engine loads strictly: a checkpoint that does not match never loads silently."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kokoro_server.engines import EngineError, load_engine
from kokoro_server.engines.torch_engine import (
    TorchEngine,
    _seed,
    build_kmodel,
    for_device,
    load_checkpoint_strictly,
)
from kokoro_server.engines.torch_inference import fold_weight_norm
from kokoro_server.model_dir import ModelDir, ModelDirError, open_model_dir, style_for

pytestmark = [pytest.mark.kokoro, pytest.mark.real_model]


def rewrite_checkpoint(root: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = root / "kokoro-v1_0.pth"
    checkpoint = torch.load(path, weights_only=True)
    change(checkpoint)
    torch.save(checkpoint, path)


def drop_key(checkpoint: dict[str, Any]) -> None:
    del checkpoint["decoder"][next(iter(checkpoint["decoder"]))]


def add_key(checkpoint: dict[str, Any]) -> None:
    checkpoint["predictor"]["surprise.weight"] = torch.zeros(3)


def reshape_key(checkpoint: dict[str, Any]) -> None:
    key = next(k for k, v in checkpoint["bert_encoder"].items() if v.ndim == 2)
    checkpoint["bert_encoder"][key] = torch.zeros(7, 7)


def drop_component(checkpoint: dict[str, Any]) -> None:
    del checkpoint["text_encoder"]


def prefix_module(checkpoint: dict[str, Any]) -> None:
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
def test_a_mismatched_checkpoint_is_refused(
    tiny_model: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None], message: str
) -> None:
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


def test_every_forward_runs_on_the_engines_own_thread_whichever_thread_asks(tiny_model: Path) -> None:
    """torch's OpenMP teams are per calling thread; two of them on a small CPU slow both (the
    module's docstring): begin and each window asked from other threads still run on one."""
    model = open_model_dir(tiny_model)
    engine = load_engine(model)
    assert isinstance(engine, TorchEngine)
    ran_on: set[str] = set()
    for part in (engine._model.bert, engine._model.decoder):
        part.register_forward_pre_hook(lambda module, args: ran_on.add(threading.current_thread().name))
    phonemes = "ðɪs ɪz ɐ tˈɛst."
    style = style_for(model.voices["af_heart"], phonemes)
    with ThreadPoolExecutor(1, thread_name_prefix="asker") as asker:
        decoding = asker.submit(engine.begin, phonemes, style, 1.0).result()
        first = asker.submit(decoding.step, 20).result()
    rest = decoding.rest()  # and from this thread
    assert first.size and rest.size
    assert ran_on == {"kokoro-torch_0"}


@pytest.mark.parametrize("phonemes", ["", "a" * 511])
def test_out_of_range_phonemes_raise_engine_error(tiny_model: Path, phonemes: str) -> None:
    model = open_model_dir(tiny_model)
    with pytest.raises(EngineError):
        load_engine(model).synthesize(phonemes, model.voices["af_heart"][0], 1.0)


def _kokoros_own(model: ModelDir) -> torch.nn.Module:
    kmodel = build_kmodel(model.config)
    load_checkpoint_strictly(kmodel, model.weights)
    return kmodel.eval()


def _render(model: ModelDir, phonemes: str, *other_seeds: int, engines_layers: bool = False,
            ) -> tuple[np.ndarray, list[np.ndarray]]:
    """The same phonemes through the engine, and through kokoro's KModel.forward seeded as the
    engine seeds them, then seeded with each of ``other_seeds``. ``engines_layers``: the KModel's
    layers rewritten as the engine's on the CPU (torch_engine.for_device)."""
    style = style_for(model.voices["af_heart"], phonemes)
    ours = load_engine(model).synthesize(phonemes, style, 1.0).audio
    kmodel = _kokoros_own(model)  # built before seeding: building draws random weights
    if engines_layers:
        for_device(kmodel, "cpu")
    theirs = []
    for seed in (_seed(phonemes, 1.0), *other_seeds):
        torch.manual_seed(seed)
        with torch.inference_mode():
            theirs.append(kmodel(phonemes, torch.from_numpy(style).reshape(1, -1), 1.0).numpy().reshape(-1))
    return ours, theirs


PHONEMES = "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst sˈɛntəns, sˈoʊ ɪt hɐz sˈɛvɹəl wˈɪndoʊz tə dɪkˈoʊd."


def test_without_its_noise_the_engine_speaks_every_sample_as_kokoros_forward_over_its_layers(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own front and the harmonic source made once per chunk change no sample of what KModel's
    forward says over the same layers, seeded alike, once the vocoder's Gaussian excitation noise
    is silenced on both sides (the source draws it merged, as
    test_the_merged_source_noise_has_kokoros_distribution shows). The engine's layers are kokoro's
    rewritten: bit for bit (test_torch_inference.py) and, on the CPU, time-major to float rounding
    (test_time_major.py, noise on: silenced, the vocoder's instance norms meet channels constant to
    the last bit, where any rounding is noise they amplify)."""
    monkeypatch.setattr(torch, "randn_like", torch.zeros_like)
    ours, (theirs,) = _render(open_model_dir(tiny_model), PHONEMES, engines_layers=True)
    np.testing.assert_array_equal(ours, theirs)


def test_with_its_noise_the_engine_speaks_as_one_more_of_kmodels_draws(tiny_model: Path) -> None:
    """With the noise drawn, the engine's render is to KModel's what KModel's renders under other
    seeds are to each other: as loud, and alike to the same degree (the random-weight model's
    output is mostly shaped by its excitation noise, so no two draws are sample-equal)."""
    ours, (theirs, *others) = _render(open_model_dir(tiny_model), PHONEMES, 1, 2)

    def rms(x: np.ndarray) -> float:
        return float(np.sqrt(np.mean(np.square(x))))

    kin = [float(np.corrcoef(a, b)[0, 1]) for a, b in ((theirs, others[0]), (theirs, others[1]), (*others,))]
    assert not np.array_equal(ours, theirs)
    assert float(np.corrcoef(ours, theirs)[0, 1]) == pytest.approx(np.mean(kin), abs=0.05)
    assert rms(ours) == pytest.approx(np.mean([rms(x) for x in (theirs, *others)]), rel=0.03)


@pytest.mark.parametrize(("hz", "amp"), [(0.0, 0.1 / 3), (180.0, 0.003)], ids=["unvoiced", "voiced"])
def test_the_merged_source_noise_has_kokoros_distribution(tiny_model: Path, hz: float, amp: float) -> None:
    """kokoro adds amp * N(0, 1) to each of 9 harmonics, then merges them with a linear layer w;
    the engine draws amp * N(0, |w|^2) once, after the merge. Over 400 frames (120 000 samples)
    of one F0 the pre-tanh noise of both (the source less its silenced render, seeded alike) has
    the spread amp * |w|, unvoiced (amp = sine_amp / 3) and voiced (amp = noise_std)."""
    engine = load_engine(open_model_dir(tiny_model))
    assert isinstance(engine, TorchEngine)
    shared = engine._source
    f0 = torch.full((1, 800), hz)

    def kokoros(f0: torch.Tensor) -> torch.Tensor:
        return shared.original(shared.upsample(f0[:, None]).transpose(1, 2))[0]

    def noise(make: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        with torch.inference_mode():
            torch.manual_seed(7)
            noisy = torch.atanh(make(f0))
            torch.manual_seed(7)  # the same sine phases, no noise
            with pytest.MonkeyPatch.context() as quiet:
                quiet.setattr(torch, "randn_like", torch.zeros_like)
                clean = torch.atanh(make(f0))
        return (noisy - clean).reshape(-1)

    expected = amp * float(torch.linalg.vector_norm(shared.original.l_linear.weight))
    for drawn in (noise(shared.make), noise(kokoros)):
        assert float(drawn.std()) == pytest.approx(expected, rel=0.02)
        assert abs(float(drawn.mean())) < 0.02 * expected


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
