"""The onnx engine reads a Kokoro export's interface from the graph it cuts (onnx_signature.py),
and starts on exports spelt or built otherwise than the packaged one: other input names and token
type, a graph it cannot cut (loaded whole), a graph that is not Kokoro's (refused by name).

Every graph is the real int8 export, rewritten in a copy of its model directory, except the last.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import real_audio as ra
from onnx import TensorProto, helper

from kokoro_server.engines import load_engine
from kokoro_server.engines.onnx_engine import OnnxEngine, session_options
from kokoro_server.engines.onnx_signature import of_graph, of_session, signature
from kokoro_server.engines.onnx_split import FEATURES
from kokoro_server.model_dir import ModelDirError, open_model_dir, style_for

pytestmark = pytest.mark.kokoro

PHONEMES = "həlˈO wˈɜɹld."  # "Hello world." as misaki writes it


def spoken(engine: OnnxEngine) -> np.ndarray:
    return engine.synthesize(PHONEMES, style_for(ra.model().voices["jf_alpha"], PHONEMES), 1.0).audio


def model_dir_with(tmp_path: Path, graph: onnx.ModelProto) -> Path:
    """A copy of the packaged directory whose weights are ``graph``."""
    root = ra.copy_dir(ra.packaged_dir(), tmp_path / "model", copy_weights=False)
    manifest = json.loads((root / "manifest.json").read_text())
    weights = root / manifest["weights"]
    weights.unlink()  # the link to the shared original
    onnx.save(graph, str(weights))
    for key in ("sha256", "size"):  # the original's digest
        manifest.pop(key, None)
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def rewritten(tmp_path: Path, edit: Callable[[onnx.GraphProto], None]) -> OnnxEngine:
    """The engine on the packaged export as ``edit`` changed it."""
    model = onnx.load(str(ra.model().weights))
    edit(model.graph)
    engine = load_engine(open_model_dir(model_dir_with(tmp_path, model)))
    assert isinstance(engine, OnnxEngine)
    return engine


def test_the_graph_and_a_session_of_it_read_the_same_interface() -> None:
    weights = ra.model().weights
    from_graph = of_graph(onnx.load(str(weights)))
    session = ort.InferenceSession(str(weights), session_options(1), providers=["CPUExecutionProvider"])
    from_session = of_session(session)
    assert from_graph == from_session
    sig = signature(*from_graph, weights)
    assert (sig.tokens, sig.tokens_dtype, sig.style) == ("tokens", np.int64, "style")
    assert (sig.speed, sig.speed_dtype, sig.speed_shape) == ("speed", np.float32, (1,))
    assert (sig.audio, sig.durations) == ("audio", "durations")


def test_other_spellings_of_the_inputs_speak_alike(tmp_path: Path) -> None:
    renamed = {"style": "ref_s", "speed": "rate"}

    def respell(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            node.input[:] = [renamed.get(name, name) for name in node.input]
        for value in graph.input:
            if value.name == "tokens":  # int32 ids, cast to the int64 the graph reads
                value.name = "input_ids"
                value.type.tensor_type.elem_type = TensorProto.INT32
            value.name = renamed.get(value.name, value.name)
        graph.node.insert(0, helper.make_node("Cast", ["input_ids"], ["tokens"], to=TensorProto.INT64))

    engine = rewritten(tmp_path, respell)
    sig = engine._sig
    assert (sig.tokens, sig.tokens_dtype, sig.style, sig.speed) == ("input_ids", np.int32, "ref_s", "rate")
    assert engine.windowed
    np.testing.assert_array_equal(spoken(engine), spoken(ra.engine()))


def test_a_graph_it_cannot_cut_is_loaded_whole_and_speaks_alike(tmp_path: Path) -> None:
    def hide_the_features(graph: onnx.GraphProto) -> None:  # no tensor of that name to cut at
        for node in graph.node:
            node.input[:] = [name + ".renamed" if name == FEATURES else name for name in node.input]
            node.output[:] = [name + ".renamed" if name == FEATURES else name for name in node.output]

    engine = rewritten(tmp_path, hide_the_features)
    assert not engine.windowed
    whole = engine.synthesize(PHONEMES, style_for(ra.model().voices["jf_alpha"], PHONEMES), 1.0)
    assert whole.durations is not None and len(whole.durations) == len(engine.token_ids(PHONEMES)) + 2
    np.testing.assert_array_equal(whole.audio, spoken(ra.engine()))  # the parts reproduce the whole exactly


def test_a_graph_without_kokoros_interface_is_refused_by_name(tmp_path: Path) -> None:
    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "not-kokoro", [value],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = open_model_dir(model_dir_with(tmp_path, helper.make_model(graph)))
    refused = rf"{model.weights}: not a Kokoro ONNX graph \(inputs x: tensor\(float\) \[1, 4\]"
    with pytest.raises(ModelDirError, match=refused):
        load_engine(model)
