"""kokoro's layers as the torch engine runs them: what each computes, with less work per call.

kokoro 0.9.4 builds its model for training: weight-normed layers recompute their weights before
every call; an adaptive instance norm, after the norm's own affine pass, scales and shifts the
normalized tensor in two more passes; the vocoder's inverse STFT raises a complex exponential over
every bin where the polar form needs none. On a CPU a pass over a [channels, frames] tensor costs
about as much as its arithmetic, so the engine rewrites these once at load
(:func:`fuse_for_inference`; bench/results/fused_ops-torch.json times each against kokoro's).

Each rewrite computes the same function: weight norm and the polar form to the last bit, the norm
to float32 rounding (the same terms, summed in another order). tests/kokoro/test_torch_fused.py
holds each to kokoro's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812 (torch's own convention)
from kokoro.istftnet import AdaIN1d, TorchSTFT
from torch.nn.utils.weight_norm import WeightNorm


@dataclass(frozen=True)
class Fused:
    """How many layers of each kind :func:`fuse_for_inference` rewrote."""

    weight_norm: int
    adain: int
    istft: int


def fuse_for_inference(model: torch.nn.Module) -> Fused:
    """Rewrite ``model``'s layers for inference, in place; a second call finds nothing to do."""
    return Fused(weight_norm=fold_weight_norm(model), adain=_swap(model, AdaIN1d, FusedAdaIN),
                 istft=_swap(model, TorchSTFT, PolarSTFT))


def fold_weight_norm(model: torch.nn.Module) -> int:
    """Compute each weight-normed layer's weight once: kokoro builds its layers with
    ``weight_norm``, whose hook recomputes ``g * v / ||v||`` before every forward call: on the CPU
    0.058 s a decoder call (bench/results/profile-torch.json, ``decoder_weight_norm_s``), paid once
    per window. Returns how many layers were folded."""
    folded = 0
    for module in model.modules():
        names = [hook.name for hook in module._forward_pre_hooks.values() if isinstance(hook, WeightNorm)]
        for name in names:
            torch.nn.utils.remove_weight_norm(module, name)
            folded += 1
    return folded


class FusedAdaIN(AdaIN1d):  # type: ignore[misc]  # torch has no stubs where mypy runs (.venv)
    """``(1 + gamma) * norm(x) + beta`` as one instance norm: the norm's own affine weight and bias
    times ``1 + gamma``, plus ``beta``, are one per-channel scale and shift (batch 1, the engine's;
    a larger batch runs kokoro's form)."""

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        if x.size(0) != 1:
            return super().forward(x, s)
        gamma, beta = self.fc(s)[0].chunk(2)
        scale = 1 + gamma
        weight = scale * self.norm.weight
        bias = torch.addcmul(beta, scale, self.norm.bias)
        return F.instance_norm(x, weight=weight, bias=bias, eps=self.norm.eps)


class PolarSTFT(TorchSTFT):  # type: ignore[misc]
    """The inverse STFT of ``magnitude * e^(i phase)`` from ``torch.polar``: the same complex
    spectrum, without a complex exponential and a complex multiply over every bin."""

    def inverse(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        spectrum = torch.polar(magnitude, phase)
        window = self.window.to(magnitude.device)
        audio = torch.istft(spectrum, self.filter_length, self.hop_length, self.win_length, window=window)
        return audio.unsqueeze(-2)


def _swap(model: torch.nn.Module, kind: type[torch.nn.Module], fused: type[torch.nn.Module]) -> int:
    """Give each module of exactly ``kind`` the ``fused`` subclass's methods (its parameters and
    buffers stay where they are); return how many."""
    swapped = 0
    for module in model.modules():
        if type(module) is kind:
            module.__class__ = fused
            swapped += 1
    return swapped
