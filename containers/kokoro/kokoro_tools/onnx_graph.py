"""Changes to the Kokoro ONNX export, made once when the model directory is built.

The int8 export of Kokoro-82M outputs audio only, but computes per-token durations on the way
(``/encoder/Clip_output_0``: float32 [1, tokens], frames per token including both pad tokens,
summing to the frame count). :func:`expose_durations` adds them as a second graph output named
``durations``, which the onnx engine returns (word timestamps come from them, see words.py).
Nothing is computed twice: the output only keeps a tensor the graph already makes.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

DURATIONS_TENSOR = "/encoder/Clip_output_0"  # the duration predictor's clamped frames per token
DURATIONS_OUTPUT = "durations"


class GraphError(RuntimeError):
    """The graph is not the Kokoro export this module knows how to change."""


def expose_durations(source: Path, target: Path) -> None:
    """Write ``source``'s graph to ``target`` with ``durations`` as an extra output."""
    model = onnx.load(str(source))
    graph = model.graph
    if any(output.name == DURATIONS_OUTPUT for output in graph.output):
        onnx.save(model, str(target))
        return
    if not any(DURATIONS_TENSOR in node.output for node in graph.node):
        raise GraphError(f"{source}: no node makes {DURATIONS_TENSOR}; not the Kokoro-82M export")
    graph.node.append(helper.make_node("Identity", [DURATIONS_TENSOR], [DURATIONS_OUTPUT], name="expose_durations"))
    graph.output.append(helper.make_tensor_value_info(DURATIONS_OUTPUT, TensorProto.FLOAT, [1, "tokens"]))
    onnx.save(model, str(target))
