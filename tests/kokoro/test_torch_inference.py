"""The torch engine's rewrites of kokoro's layers compute what kokoro's own do, bit for bit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from kokoro.istftnet import TorchSTFT

from kokoro_server.engines.torch_engine import build_kmodel, load_checkpoint_strictly
from kokoro_server.engines.torch_inference import PolarSTFT, Rewritten, for_inference
from kokoro_server.model_dir import open_model_dir, style_for

pytestmark = [pytest.mark.kokoro, pytest.mark.real_model]

PHONEMES = "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst sˈɛntəns, sˈoʊ ɪt hɐz sˈɛvɹəl wˈɪndoʊz tə dɪkˈoʊd."


def test_the_polar_inverse_stft_is_kokoros_to_the_last_bit() -> None:
    kokoros = TorchSTFT(filter_length=20, hop_length=5, win_length=20)
    polar = PolarSTFT(filter_length=20, hop_length=5, win_length=20)
    torch.manual_seed(4)  # kokoro's generator feeds it exp() and sin() of its last convolution
    magnitude, phase = torch.exp(torch.randn(1, 11, 4000)), torch.sin(torch.randn(1, 11, 4000))
    with torch.inference_mode():
        np.testing.assert_array_equal(polar.inverse(magnitude, phase).numpy(),
                                      kokoros.inverse(magnitude, phase).numpy())


def render(tiny_model: Path, rewrite: Callable[[torch.nn.Module], object] | None = None) -> np.ndarray:
    """PHONEMES through kokoro's KModel.forward on the tiny model, ``rewrite`` applied to it first."""
    model = open_model_dir(tiny_model)
    style = torch.from_numpy(style_for(model.voices["af_heart"], PHONEMES)).reshape(1, -1)
    kmodel = build_kmodel(model.config)
    load_checkpoint_strictly(kmodel, model.weights)
    if rewrite is not None:
        rewrite(kmodel)
    torch.manual_seed(11)
    with torch.inference_mode():
        audio: np.ndarray = kmodel.eval()(PHONEMES, style, 1.0).numpy().reshape(-1)
    assert float(np.abs(audio).max()) > 0.01
    return audio


def test_a_rewritten_kmodel_speaks_every_sample_as_kokoros_and_a_second_rewrite_finds_nothing(
    tiny_model: Path,
) -> None:
    def rewrite(kmodel: torch.nn.Module) -> None:
        first = for_inference(kmodel)
        assert first.weight_norm > 40 and first.istft == 1
        assert for_inference(kmodel) == Rewritten(weight_norm=0, istft=0)

    np.testing.assert_array_equal(render(tiny_model, rewrite), render(tiny_model))
