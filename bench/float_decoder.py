"""An int8 Kokoro export's decoder with its activations left in float, to attribute quality figures.

The packaged export (kokoro-onnx's int8) quantizes the decoder's activations dynamically: each
``DynamicQuantizeLinear`` takes its scale from the minimum and maximum of the whole tensor, so
every sample depends on the loudest moment of everything decoded with it. One frame more or less,
or a window instead of the utterance, moves every scale, and that moves the audio. Rewriting each
``ConvInteger`` / ``MatMulInteger`` of the decoder (``/decoder/*``) into a float ``Conv`` /
``MatMul`` over the dequantized weights, ``(w - zero_point) * scale``, removes that dependence and
nothing else, so bench/windowing.py can say how much of windowed decoding's distance from one-shot
is the export's quantization and how much is the windows.

Analysis only: the server serves the export as published. Needs the ``onnx`` package (the Kokoro
environment has it).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx


def float_activation_decoder(source: Path, *, out_dir: Path | None = None) -> tuple[Path, int]:
    """Write a copy of ``source`` whose decoder runs in float; (its path, ops rewritten)."""
    import onnx

    model = onnx.load(str(source))
    rewritten = _dequantize(model.graph, prefix="/decoder")
    _sort_topologically(model.graph)
    target = Path(out_dir or tempfile.mkdtemp(prefix="kokoro-float-decoder-")) / "float-decoder.onnx"
    onnx.save(model, str(target))
    return target, rewritten


def _dequantize(graph: onnx.GraphProto, *, prefix: str) -> int:
    from onnx import helper, numpy_helper

    initializers = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def constant(name: str) -> np.ndarray:
        array: np.ndarray = numpy_helper.to_array(initializers[name]).astype(np.float32)
        return array

    dropped: set[int] = set()
    added: list[Any] = []
    new_initializers: list[Any] = []
    for node in graph.node:
        if node.op_type not in ("ConvInteger", "MatMulInteger") or not node.name.startswith(prefix):
            continue
        x_quantized, w_quantized, _, w_zero = node.input
        quantize = producer[x_quantized]
        if quantize.op_type != "DynamicQuantizeLinear":
            raise ValueError(f"{node.name}: its input is not dynamically quantized ({quantize.op_type})")
        x, x_scale = quantize.input[0], quantize.output[1]
        # The int32 result goes through an optional bias Add and a Cast to the Mul by x_scale * w_scale.
        chain, bias = [node], None
        while chain[-1].op_type != "Mul":
            (following,) = consumers[chain[-1].output[0]]
            if following.op_type == "Add":  # bias quantized as round(bias / (x_scale * w_scale))
                quantized_bias = next(i for i in following.input if i != chain[-1].output[0])
                reshape = producer[quantized_bias]
                floor = producer[producer[reshape.input[0]].input[0]]
                bias = producer[floor.input[0]].input[0]  # the Div's float bias
            chain.append(following)
        scales = producer[next(i for i in chain[-1].input if i != chain[-2].output[0])]
        w_scale = next(i for i in scales.input if i != x_scale)
        weights, zero, scale = constant(w_quantized), constant(w_zero), constant(w_scale)
        if node.op_type == "ConvInteger" and zero.ndim:  # per output channel: axis 0
            shape = (-1,) + (1,) * (weights.ndim - 1)
            zero, scale = zero.reshape(shape), scale.reshape(shape) if scale.ndim else scale
        elif node.op_type == "ConvInteger" and scale.ndim:
            scale = scale.reshape((-1,) + (1,) * (weights.ndim - 1))
        name = f"{node.name}_float_weight"
        new_initializers.append(numpy_helper.from_array(((weights - zero) * scale).astype(np.float32), name))
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        op = "Conv" if node.op_type == "ConvInteger" else "MatMul"
        inputs = [x, name] + ([bias] if bias is not None else [])
        added.append(helper.make_node(op, inputs, [chain[-1].output[0]], name=f"{node.name}_float", **attributes))
        dropped.update(id(n) for n in chain)
    kept = [n for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(kept + added)
    graph.initializer.extend(new_initializers)
    return len(added)


def _sort_topologically(graph: onnx.GraphProto) -> None:
    """Nodes in an order where each input exists before use (the rewrite appended its nodes)."""
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        waiting = []
        for node in pending:
            if all(name in available for name in node.input):
                ordered.append(node)
                available.update(node.output)
            else:
                waiting.append(node)
        if len(waiting) == len(pending):
            raise ValueError(f"{waiting[0].name}: inputs {list(waiting[0].input)} are never produced")
        pending = waiting
    del graph.node[:]
    graph.node.extend(ordered)
