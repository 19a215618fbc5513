"""Cut a Kokoro ONNX graph into the parts windowed decoding needs, in memory, at load.

Kokoro's export scopes its nodes ``/encoder/*`` (text encoder, durations, F0 and energy) and
``/decoder/*`` (decoder and iSTFTNet generator). Cut at the tensors between them:

* front: tokens, style, speed -> aligned features [1, 512, F], F0 and energy [1, 2F], and the
  per-token durations ``/encoder/Clip_output_0`` (frames per token, pads included) when present;
* source: F0 -> the harmonic source (audio rate, 600 samples per frame). Its phase is a running
  sum of F0 over the whole utterance, so it is made once and sliced per window: windows decoded
  from their own source would start their sines at phase 0 and cancel where they are crossfaded;
* body: the three features and the style -> the vocoder's input ``BODY`` (512 channels, two steps
  a frame), when the graph has it;
* vocoder: ``BODY``, F0, the style and the source slice -> audio. Windowed decoding runs the body
  with more context than the vocoder, which is most of a window's time (windows.py);
* decoder: body and vocoder in one, for a graph without ``BODY`` (its windows then run the whole
  decoder with the body's context).

Front, source, body and vocoder over all frames reproduce the whole graph's output exactly. A graph
without the front's tensors (another export) is not cut: the engine then decodes in one shot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

FEATURES = "/encoder/MatMul_1_output_0"
F0 = "/encoder/Reshape_output_0"
ENERGY = "/encoder/Reshape_1_output_0"
DURATIONS = "/encoder/Clip_output_0"
SOURCE = "/decoder/decoder/generator/m_source/l_tanh/Tanh_output_0"
BODY = "/decoder/decoder/decode.3/Div_4_output_0"


@dataclass(frozen=True)
class SplitGraph:
    """Serialized ONNX models of the parts, and the names of the graph's own inputs. ``decoder``
    is None when the graph has a body and a vocoder to cut; else both of those are."""

    front: bytes
    source: bytes
    decoder: bytes | None
    body: bytes | None
    vocoder: bytes | None
    front_outputs: tuple[str, ...]  # FEATURES, F0, ENERGY[, DURATIONS]
    style_input: str
    audio_output: str


def read_graph(path: Path) -> onnx.ModelProto | None:
    """The graph at ``path``, or None where it cannot be cut: the onnx package is missing (the
    container installs it; without it the engine still works, one-shot) or cannot parse the file
    (onnxruntime then says why, loading it whole)."""
    try:
        import onnx
    except ImportError:
        log.warning("the onnx package is missing: decoding in one shot")
        return None
    try:
        return onnx.load(str(path))
    except Exception as exc:  # a damaged protobuf
        log.warning("%s: the onnx package cannot read it (%s: %s)", path.name, type(exc).__name__, exc)
        return None


def split_graph(model: onnx.ModelProto, *, name: str, tokens: str, style: str, speed: str,
                audio: str) -> SplitGraph | None:
    """The parts of ``model`` (the graph file ``name``), or None when it does not have Kokoro's tensors."""
    import onnx.utils

    produced = {name for node in model.graph.node for name in node.output}
    if not {FEATURES, F0, ENERGY, SOURCE} <= produced:
        log.warning("%s: no Kokoro encoder/decoder tensors to cut at: decoding in one shot", name)
        return None
    front_outputs = (FEATURES, F0, ENERGY, *((DURATIONS,) if DURATIONS in produced else ()))
    extractor = onnx.utils.Extractor(model)
    front = extractor.extract_model([tokens, style, speed], list(front_outputs))
    source = extractor.extract_model([F0], [SOURCE])
    parts = {"front": front.SerializeToString(), "source": source.SerializeToString(),
             "front_outputs": front_outputs, "style_input": style, "audio_output": audio}
    if BODY in produced:  # body and vocoder within the cut imply the decoder they make up is
        body = extractor.extract_model([FEATURES, F0, ENERGY, style], [BODY])
        vocoder = extractor.extract_model([BODY, F0, style, SOURCE], [audio])
        if {i.name for i in body.graph.input} == {FEATURES, F0, ENERGY, style} and \
                {i.name for i in vocoder.graph.input} <= {BODY, F0, style, SOURCE}:
            return SplitGraph(**parts, decoder=None, body=body.SerializeToString(),
                              vocoder=vocoder.SerializeToString())
    decoder = extractor.extract_model([FEATURES, F0, ENERGY, style, SOURCE], [audio])
    inputs = {i.name for i in decoder.graph.input}
    if inputs != {FEATURES, F0, ENERGY, style, SOURCE}:  # the decoder reaches back past the cut
        log.warning("%s: the decoder needs %s besides the cut: decoding in one shot", name, sorted(inputs))
        return None
    log.info("%s: no vocoder input to cut at: each window runs the whole decoder", name)
    return SplitGraph(**parts, decoder=decoder.SerializeToString(), body=None, vocoder=None)
