"""Engines that run Kokoro: ``torch`` (kokoro's KModel; the GPU production engine) and ``onnx``."""

from __future__ import annotations

from ..model_dir import ModelDir
from .base import MAX_PHONEMES, Engine, EngineError, Synthesis
from .windows import Decoding

__all__ = [
    "Decoding", "Engine", "EngineError", "MAX_PHONEMES", "Synthesis", "load_engine",
]


def load_engine(model: ModelDir, *, device: str | None = None) -> Engine:
    """Build the engine the model directory holds. Imports only that engine's libraries."""
    if model.engine == "torch":
        from .torch_engine import TorchEngine

        return TorchEngine(model=model, device=device)
    if model.engine == "onnx":
        from .onnx_engine import OnnxEngine

        return OnnxEngine(model=model, device=device)
    raise EngineError(f"unknown engine {model.engine!r}")
