"""The time-major decoder (engines/time_major.py) computes kokoro's decoder to float rounding: each
rewritten layer against kokoro's own on the shapes the decoder gives it, and the whole rewritten
model against kokoro's forward. Heard on the real weights: test_dequantized_weights.py (the torch
engine there runs it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kokoro.istftnet import AdaIN1d, AdaINResBlock1
from test_torch_inference import PHONEMES, render

from bench.audio_metrics import snr_db
from kokoro_server.engines import load_engine
from kokoro_server.engines.time_major import (
    TimeMajorAdaIN,
    TimeMajorConv,
    TimeMajorResBlock,
    to_time_major,
)
from kokoro_server.engines.torch_engine import TorchEngine
from kokoro_server.engines.torch_inference import fold_weight_norm, for_inference
from kokoro_server.model_dir import open_model_dir, style_for

pytestmark = [pytest.mark.kokoro, pytest.mark.real_model]

ROUNDING_DB = 80.0
"""Float rounding's distance: the rewritten decoder read 110.8 dB on the tiny model and 96.5 dB on
the real weights (bench/results/torch_layout-*.json, ``error_db``); a wrong layer reads near 0."""


def close(ours: torch.Tensor, kokoros: torch.Tensor) -> None:
    assert ours.shape == kokoros.shape
    assert snr_db(kokoros.numpy().reshape(-1), ours.numpy().reshape(-1)) > ROUNDING_DB


@pytest.mark.parametrize("conv", [
    torch.nn.Conv1d(64, 64, 11, dilation=5, padding=25),  # a residual block's
    torch.nn.Conv1d(22, 32, 12, stride=6, padding=3),  # noise_convs: strided
    torch.nn.ConvTranspose1d(64, 32, 20, 10, padding=5),  # ups
    torch.nn.ConvTranspose1d(48, 48, 3, stride=2, groups=48, padding=1, output_padding=1),  # the body's pool
    torch.nn.Conv1d(48, 16, 1, bias=False),  # conv1x1
], ids=["dilated", "strided", "upsampling", "grouped-transposed", "no-bias"])
def test_a_convolution_laid_out_time_major_computes_kokoros(conv: torch.nn.Module) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, conv.in_channels, 300)
    with torch.inference_mode():
        rewritten = TimeMajorConv(conv)
        close(rewritten(x), conv(x))
        if conv.in_channels == conv.out_channels:  # fed its own time-major output
            close(rewritten(rewritten(x)), conv(conv(x)))


def test_the_adain_as_one_batch_norm_computes_kokoros_with_its_affine_weights() -> None:
    torch.manual_seed(1)
    adain = AdaIN1d(style_dim=16, num_features=32)
    with torch.no_grad():  # kokoro's norms are affine: trained weights need not be 1 and 0
        adain.norm.weight.copy_(torch.rand(32) + 0.5)
        adain.norm.bias.copy_(torch.randn(32))
    x, s = torch.randn(1, 32, 500) * 3 + 1, torch.randn(1, 16)
    with torch.inference_mode():
        close(TimeMajorAdaIN(adain)(x, s), adain(x, s))


def test_a_residual_block_with_snake_in_place_computes_kokoros_and_leaves_its_input() -> None:
    torch.manual_seed(2)
    block = AdaINResBlock1(32, 7, (1, 3, 5), style_dim=16)
    fold_weight_norm(block)
    with torch.no_grad():
        for alpha in (*block.alpha1, *block.alpha2):
            alpha.copy_(torch.rand_like(alpha) + 0.5)
    x, s = torch.randn(1, 32, 400), torch.randn(1, 16)
    kept = x.clone()
    with torch.inference_mode():
        close(TimeMajorResBlock(block)(x, s), block(x, s))
    assert torch.equal(x, kept)  # the generator hands one input to each of its blocks


def test_a_weight_normed_convolution_is_refused_until_folded() -> None:
    conv = torch.nn.utils.weight_norm(torch.nn.Conv1d(4, 4, 3))
    with pytest.raises(ValueError, match="fold its weight norm first"):
        TimeMajorConv(conv)


def test_the_rewritten_decoder_speaks_as_kokoros_and_the_front_keeps_its_layout(tiny_model: Path) -> None:
    def rewrite(kmodel: torch.nn.Module) -> None:
        for_inference(kmodel)
        assert to_time_major(kmodel.decoder) > 20
        assert to_time_major(kmodel.decoder) == 0  # a second call finds nothing left
        left = [type(m).__name__ for m in kmodel.decoder.modules()
                if isinstance(m, (torch.nn.Conv1d, torch.nn.ConvTranspose1d, AdaIN1d, torch.nn.InstanceNorm1d))]
        assert left == []
        assert any(isinstance(m, torch.nn.Conv1d) for m in kmodel.text_encoder.modules())

    close(torch.from_numpy(render(tiny_model, rewrite)), torch.from_numpy(render(tiny_model, for_inference)))


def test_the_cpu_engine_decodes_time_major(tiny_model: Path) -> None:
    model = open_model_dir(tiny_model)
    engine = load_engine(model)
    assert isinstance(engine, TorchEngine) and engine.device == "cpu"
    generator = engine._model.decoder.generator
    assert all(isinstance(block, TimeMajorResBlock) for block in generator.resblocks)
    assert isinstance(generator.conv_post, TimeMajorConv)
    audio = engine.synthesize(PHONEMES, style_for(model.voices["af_heart"], PHONEMES), 1.0).audio
    assert np.isfinite(audio).all() and audio.size > 0
