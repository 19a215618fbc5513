"""kokoro's decoder with its activations laid out time-major, for the CPU.

The decoder is convolutions over [1, channels, time] tensors: 75 % of a CPU decode of the real
weights, most of it in the vocoder's residual blocks over 256 and 128 channels at 800 and 4 800
steps a second of audio. oneDNN, which runs torch's convolutions on a CPU, computes them fastest
with the channels of each time step side by side (its ``nwc``); handed kokoro's channel-major
tensors it reorders every input and output, and a residual block's convolution took 1.25x to 2.3x
as long here (a /tmp probe: 162 ms against 93 ms for 128 channels over 50 520 steps, kernel 11).
So on the CPU the engine runs each of the decoder's convolutions as the 2-D convolution of a
[1, channels, 1, time] tensor in torch's ``channels_last`` format, which is that layout, and keeps
the activations so between them:

* :class:`TimeMajorConv`: a Conv1d or ConvTranspose1d, its weight laid out once at load;
* :class:`TimeMajorAdaIN`: kokoro's AdaIN1d, an instance norm then ``(1 + gamma) x + beta`` from the
  style, as one batch norm in training mode (over a batch of one, its statistics are the instance
  norm's) whose affine weight and bias are the style's: one layout-keeping pass where the instance
  norm would first copy the tensor back to channel-major;
* :class:`TimeMajorResBlock`: kokoro's AdaINResBlock1 with those two, its Snake activations
  (``x + sin(a x)^2 / a``) computed in place: one new tensor each instead of four.

Elementwise ops between them keep their input's layout, so nothing else changes. The audio is
kokoro's to float rounding, not bit for bit (the sums run in another order): on the real weights
about 90 dB below the signal (tests/kokoro/test_time_major.py). Each rewrite's share of the time is
measured by ``python -m bench.torch_layout`` (docs/throughput.md). The front (BERT, LSTMs, the text
encoder) keeps kokoro's layout: rewritten too, it was no faster and its durations could move.

Only on the CPU: on a GPU cuDNN picks its own layouts, and this was not measured there
(TorchEngine applies it to CPU models only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F
from kokoro.istftnet import AdaIN1d, AdaINResBlock1

_LAID_OUT = torch.channels_last


def _time_major(x: torch.Tensor) -> torch.Tensor:
    """[1, C, T] as [1, C, 1, T] channels-last: a view when ``x`` is already time-major."""
    return x.unsqueeze(2).contiguous(memory_format=_LAID_OUT)


class TimeMajorConv(torch.nn.Module):  # type: ignore[misc]  # torch has no stubs where mypy runs (.venv)
    """A Conv1d or ConvTranspose1d (zero padding) as a 2-D convolution over time-major activations."""

    def __init__(self, conv: torch.nn.Conv1d | torch.nn.ConvTranspose1d) -> None:
        super().__init__()
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError(f"{conv}: only numeric zero padding is laid out time-major")
        if hasattr(conv, "weight_v"):
            raise ValueError(f"{conv}: fold its weight norm first (torch_inference.fold_weight_norm)")
        self.transposed = isinstance(conv, torch.nn.ConvTranspose1d)
        weight = conv.weight.detach()[:, :, None, :].contiguous(memory_format=_LAID_OUT)
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.bias = conv.bias
        self.stride, self.padding = (1, conv.stride[0]), (0, conv.padding[0])
        self.dilation, self.groups = (1, conv.dilation[0]), conv.groups
        self.output_padding = (0, conv.output_padding[0]) if self.transposed else (0, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.transposed:
            y = F.conv_transpose2d(_time_major(x), self.weight, self.bias, self.stride, self.padding,
                                   self.output_padding, self.groups, self.dilation)
        else:
            y = F.conv2d(_time_major(x), self.weight, self.bias, self.stride, self.padding, self.dilation,
                         self.groups)
        return y.squeeze(2)


class TimeMajorAdaIN(torch.nn.Module):  # type: ignore[misc]
    """kokoro's AdaIN1d, ``(1 + gamma) * instance_norm(x) + beta``, as one batch norm."""

    def __init__(self, adain: AdaIN1d) -> None:
        super().__init__()
        norm = adain.norm
        self.fc = adain.fc
        self.eps = norm.eps
        self.weight = norm.weight if norm.affine else None
        self.bias = norm.bias if norm.affine else None

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 1:
            raise ValueError(f"time-major AdaIN: a batch of one, got {x.shape[0]}")  # batch norm pools a batch
        gamma, beta = self.fc(s).reshape(-1).chunk(2)
        scale = 1 + gamma
        weight = scale if self.weight is None else scale * self.weight
        bias = beta if self.bias is None else scale * self.bias + beta
        return F.batch_norm(_time_major(x), None, None, weight, bias, True, 0.0, self.eps).squeeze(2)


def _snake(x: torch.Tensor, alpha: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """``x + sin(alpha x)^2 / alpha`` in one new tensor."""
    out = x * alpha
    return out.sin_().square_().mul_(inverse).add_(x)


class TimeMajorResBlock(torch.nn.Module):  # type: ignore[misc]
    """kokoro's AdaINResBlock1 (three dilated pairs of AdaIN, Snake and convolution, each pair's
    output added to its input) on time-major activations."""

    def __init__(self, block: AdaINResBlock1) -> None:
        super().__init__()
        self.convs1 = torch.nn.ModuleList(TimeMajorConv(c) for c in block.convs1)
        self.convs2 = torch.nn.ModuleList(TimeMajorConv(c) for c in block.convs2)
        self.adain1 = torch.nn.ModuleList(TimeMajorAdaIN(n) for n in block.adain1)
        self.adain2 = torch.nn.ModuleList(TimeMajorAdaIN(n) for n in block.adain2)
        self.alpha1, self.alpha2 = block.alpha1, block.alpha2

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        for c1, c2, n1, n2, a1, a2 in zip(self.convs1, self.convs2, self.adain1, self.adain2, self.alpha1,
                                          self.alpha2, strict=True):
            xt = c1(_snake(n1(x, s), a1, 1 / a1))
            xt = c2(_snake(n2(xt, s), a2, 1 / a2))
            x = xt.add_(x)  # xt is this pair's own; the block's input x is shared with its siblings
        return x


Rewrite = Callable[[torch.nn.Module], torch.nn.Module]

REWRITES: Mapping[type, Rewrite] = {
    AdaINResBlock1: TimeMajorResBlock,
    AdaIN1d: TimeMajorAdaIN,
    torch.nn.Conv1d: TimeMajorConv,
    torch.nn.ConvTranspose1d: TimeMajorConv,
}
"""Which of kokoro's modules become which; a module of another kind is searched for them."""


def to_time_major(module: torch.nn.Module, rewrites: Mapping[type, Rewrite] = REWRITES) -> int:
    """Replace ``module``'s submodules of the kinds in ``rewrites`` (weight norm folded first), in
    place; returns how many. A second call finds none. ``rewrites``: all of them by default, a part
    to time one (bench/torch_layout.py)."""
    replaced = 0
    for name, child in list(module.named_children()):
        rewrite = rewrites.get(type(child))
        if rewrite is None:
            replaced += to_time_major(child, rewrites)
        else:
            setattr(module, name, rewrite(child))
            replaced += 1
    return replaced
