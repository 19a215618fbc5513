"""Which of a Kokoro ONNX graph's inputs are the token ids, the style vector and the speed, and
which output is the waveform (and the durations, where the export has them).

Exports spell them differently: token ids ``tokens`` / ``input_ids`` (int64 or int32, [1, n + 2]
with the pad id 0 at both ends), the style vector ``style`` / ``ref_s`` (float32 [1, 256]) and
``speed`` (float or int, [1] or a scalar); outputs: the waveform (the first float output whose
name lacks ``dur``) and per-token durations (an output whose name has ``dur``).

The same reading serves an onnxruntime session (:func:`of_session`) and the graph's protobuf
(:func:`of_graph`): the engine reads the protobuf it cuts anyway, so it builds no session of the
whole graph only to learn these names (the slowest part of its start, when it was built).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model_dir import ModelDirError

if TYPE_CHECKING:
    import onnx
    import onnxruntime as ort

INT_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
SPEED_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32,
}
TOKEN_NAMES = ("tokens", "input_ids")
STYLE_NAMES = ("style", "ref_s")

Dim = int | str | None


@dataclass(frozen=True)
class Arg:
    """A graph input or output as onnxruntime describes it: ``type`` is e.g. ``tensor(float)``."""

    name: str
    type: str
    shape: tuple[Dim, ...]


@dataclass(frozen=True)
class Signature:
    tokens: str
    tokens_dtype: type
    style: str
    speed: str
    speed_dtype: type
    speed_shape: tuple[int, ...]
    audio: str
    durations: str | None


def of_session(session: ort.InferenceSession) -> tuple[list[Arg], list[Arg]]:
    """(inputs, outputs) of a loaded session."""
    def args(nodes: Sequence[Any]) -> list[Arg]:
        return [Arg(n.name, n.type, tuple(n.shape)) for n in nodes]
    return args(session.get_inputs()), args(session.get_outputs())


def of_graph(model: onnx.ModelProto) -> tuple[list[Arg], list[Arg]]:
    """(inputs, outputs) of a graph's protobuf, as onnxruntime would list them: initializers that
    an older export also lists as inputs are not inputs to feed."""
    from onnx import TensorProto

    weights = {t.name for t in model.graph.initializer}

    def arg(value: onnx.ValueInfoProto) -> Arg:
        tensor = value.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
        return Arg(value.name, f"tensor({TensorProto.DataType.Name(tensor.elem_type).lower()})", dims)

    inputs = [arg(v) for v in model.graph.input if v.name not in weights]
    return inputs, [arg(v) for v in model.graph.output]


def signature(inputs: Sequence[Arg], outputs: Sequence[Arg], path: Path) -> Signature:
    """The graph's spelling of Kokoro's interface, or ModelDirError naming ``path`` and what it has."""
    by_name = {i.name: i for i in inputs}

    def pick(names: tuple[str, ...], want: Callable[[Arg], bool]) -> str | None:
        for name in names:
            if name in by_name and want(by_name[name]):
                return name
        found = [i.name for i in inputs if want(i)]
        return found[0] if len(found) == 1 else None

    tokens = pick(TOKEN_NAMES, lambda i: i.type in INT_TYPES and len(i.shape) == 2)
    style = pick(STYLE_NAMES, lambda i: i.type == "tensor(float)" and len(i.shape) == 2)
    rest = [n for n in by_name if n not in (tokens, style)]
    speed = "speed" if "speed" in rest else (rest[0] if len(rest) == 1 else None)
    audio = next((o.name for o in outputs if o.type == "tensor(float)" and "dur" not in o.name.lower()), None)
    if tokens is None or style is None or speed is None or audio is None or by_name[speed].type not in SPEED_TYPES:
        described = ", ".join(f"{i.name}: {i.type} {list(i.shape)}" for i in inputs)
        raise ModelDirError(
            f"{path}: not a Kokoro ONNX graph (inputs {described}; outputs {[o.name for o in outputs]}); "
            "expected token ids, a [1, 256] style vector and a speed"
        )
    durations = next((o.name for o in outputs if "dur" in o.name.lower()), None)
    return Signature(
        tokens=tokens, tokens_dtype=INT_TYPES[by_name[tokens].type], style=style, speed=speed,
        speed_dtype=SPEED_TYPES[by_name[speed].type], speed_shape=tuple(1 for _ in by_name[speed].shape),
        audio=audio, durations=durations,
    )
