"""The torch engine's fused layers compute what kokoro's own do: the polar inverse STFT to the last
bit, the adaptive instance norm to float32 rounding, the whole model to well within what a
listener could hear."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kokoro.istftnet import AdaIN1d, TorchSTFT

from kokoro_server.engines.torch_engine import build_kmodel, load_checkpoint_strictly
from kokoro_server.engines.torch_fused import FusedAdaIN, PolarSTFT, fuse_for_inference
from kokoro_server.model_dir import open_model_dir, style_for

pytestmark = [pytest.mark.kokoro, pytest.mark.real_model]

PHONEMES = "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst sˈɛntəns, sˈoʊ ɪt hɐz sˈɛvɹəl wˈɪndoʊz tə dɪkˈoʊd."


def _adain(channels: int) -> AdaIN1d:
    torch.manual_seed(3)
    layer = AdaIN1d(128, channels).eval()
    with torch.no_grad():  # a trained norm's own affine part is not the identity
        layer.norm.weight.normal_(1.0, 0.3)
        layer.norm.bias.normal_(0.0, 0.3)
    return layer


@pytest.mark.parametrize("batch", [1, 2])
def test_the_fused_instance_norm_computes_kokoros_to_float_rounding(batch: int) -> None:
    kokoros = _adain(64)
    fused = _adain(64)
    fused.__class__ = FusedAdaIN
    x, s = torch.randn(batch, 64, 300) * 3 + 1, torch.randn(batch, 128)
    with torch.inference_mode():
        expected, got = kokoros(x, s).numpy(), fused(x, s).numpy()
    if batch == 1:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        assert not np.array_equal(got, expected)  # a rewrite, not kokoro's form: another rounding
    else:  # one scale per channel holds one batch item's style: a batch runs kokoro's form
        np.testing.assert_array_equal(got, expected)


def test_the_polar_inverse_stft_is_kokoros_to_the_last_bit() -> None:
    kokoros = TorchSTFT(filter_length=20, hop_length=5, win_length=20)
    polar = PolarSTFT(filter_length=20, hop_length=5, win_length=20)
    torch.manual_seed(4)
    magnitude, phase = torch.exp(torch.randn(1, 11, 4000)), torch.sin(torch.randn(1, 11, 4000)) * 3
    with torch.inference_mode():
        np.testing.assert_array_equal(polar.inverse(magnitude, phase).numpy(),
                                      kokoros.inverse(magnitude, phase).numpy())


def test_fused_kmodel_speaks_as_kokoros_and_a_second_fuse_finds_nothing(tiny_model: Path) -> None:
    """Seeded alike, the fused model's render differs from kokoro's by float32 rounding carried
    through the network: a millionth of its peak, where 16-bit audio resolves 1/32768."""
    model = open_model_dir(tiny_model)
    style = torch.from_numpy(style_for(model.voices["af_heart"], PHONEMES)).reshape(1, -1)
    renders = []
    for fuse in (False, True):
        kmodel = build_kmodel(model.config)
        load_checkpoint_strictly(kmodel, model.weights)
        if fuse:
            first = fuse_for_inference(kmodel)
            assert first.weight_norm > 40 and first.adain > 20 and first.istft == 1
            assert fuse_for_inference(kmodel) == type(first)(weight_norm=0, adain=0, istft=0)
        torch.manual_seed(11)
        with torch.inference_mode():
            renders.append(kmodel.eval()(PHONEMES, style, 1.0).numpy().reshape(-1))
    kokoros, fused = renders
    peak = float(np.abs(kokoros).max())
    assert peak > 0.01
    np.testing.assert_allclose(fused, kokoros, rtol=0, atol=1e-5 * peak)
