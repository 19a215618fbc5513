"""kokoro's model as the torch engine runs it: the same function, with less work per call.

kokoro 0.9.4 builds its model for training: its weight-normed layers recompute their weights before
every call, and its vocoder's inverse STFT raises a complex exponential over every bin where
``torch.polar`` builds the same spectrum from cosines and sines. The engine rewrites both once at
load (:func:`for_inference`); each computes what kokoro's does, bit for bit
(tests/kokoro/test_torch_inference.py), and bench/profile_paragraph.py times both forms
(``decoder_weight_norm_s``, ``istft_complex_exp_s`` against ``istft_polar_s``).

:func:`decoder_body` is kokoro's ``Decoder.forward`` up to its vocoder, so that windowed decoding
can give the two parts different context (windows.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from kokoro.istftnet import Decoder, TorchSTFT
from torch.nn.utils.weight_norm import WeightNorm


@dataclass(frozen=True)
class Rewritten:
    """How many layers of each kind :func:`for_inference` rewrote."""

    weight_norm: int
    istft: int


def for_inference(model: torch.nn.Module) -> Rewritten:
    """Rewrite ``model``'s layers for inference, in place; a second call finds nothing to do."""
    return Rewritten(weight_norm=fold_weight_norm(model), istft=_polar_istft(model))


def fold_weight_norm(model: torch.nn.Module) -> int:
    """Compute each weight-normed layer's weight once: kokoro builds its layers with
    ``weight_norm``, whose hook recomputes ``g * v / ||v||`` before every forward call: on the CPU
    0.03-0.06 s a decoder call on the tiny model (bench/results/profile-torch.json,
    ``decoder_weight_norm_s``, and the runs docs/throughput.md quotes), paid once per window.
    Returns how many layers were folded."""
    folded = 0
    for module in model.modules():
        names = [hook.name for hook in module._forward_pre_hooks.values() if isinstance(hook, WeightNorm)]
        for name in names:
            torch.nn.utils.remove_weight_norm(module, name)
            folded += 1
    return folded


class PolarSTFT(TorchSTFT):  # type: ignore[misc]  # torch has no stubs where mypy runs (.venv)
    """kokoro's TorchSTFT, its inverse taking ``magnitude * e^(i phase)`` from ``torch.polar``: the
    same complex spectrum, without a complex exponential and a complex multiply per bin."""

    def inverse(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        spectrum = torch.polar(magnitude, phase)
        window = self.window.to(magnitude.device)
        audio = torch.istft(spectrum, self.filter_length, self.hop_length, self.win_length, window=window)
        return audio.unsqueeze(-2)


def _polar_istft(model: torch.nn.Module) -> int:
    """Give each of kokoro's TorchSTFT modules PolarSTFT's methods (its window stays where it is)."""
    swapped = 0
    for module in model.modules():
        if type(module) is TorchSTFT:
            module.__class__ = PolarSTFT
            swapped += 1
    return swapped


def decoder_body(decoder: Decoder, asr: torch.Tensor, f0: torch.Tensor, energy: torch.Tensor,
                 style: torch.Tensor) -> torch.Tensor:
    """kokoro 0.9.4's ``Decoder.forward`` without its last line: the vocoder's input (two steps a
    frame); ``decoder.generator(body, style, f0)`` finishes the call, exactly."""
    f0_down = decoder.F0_conv(f0.unsqueeze(1))
    energy_down = decoder.N_conv(energy.unsqueeze(1))
    x = decoder.encode(torch.cat([asr, f0_down, energy_down], axis=1), style)
    asr_res = decoder.asr_res(asr)
    res = True
    for block in decoder.decode:
        if res:
            x = torch.cat([x, asr_res, f0_down, energy_down], axis=1)
        x = block(x, style)
        if block.upsample_type != "none":
            res = False
    return x
