"""The model directory: config, weights and voice packs, validated before anything is served.

Layouts (the torch one is Hugging Face's ``hexgrad/Kokoro-82M`` snapshot, which is what the S3
model cache holds and SageMaker mounts at /opt/ml/model):

    torch: config.json, <one>.pth, voices/<name>.pt        (manifest.json optional)
    onnx:  config.json, <one>.onnx, voices/<name>.npy|.pt  (manifest.json optional)

Every problem is reported as a :class:`ModelDirError` naming the file at fault, so a bad mount
fails the container's start with a readable message instead of a half-loaded model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

VOICE_SHAPE = (510, 1, 256)  # one 256-d style vector per phoneme-count 1..510
ENGINES = ("torch", "onnx")
_VOICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TORCH_CONFIG_KEYS = (
    "vocab", "n_token", "plbert", "hidden_dim", "style_dim", "n_layer", "max_dur", "dropout",
    "text_encoder_kernel_size", "istftnet", "n_mels",
)


class ModelDirError(RuntimeError):
    """The model directory cannot be served; the message names the file and what is wrong."""


@dataclass(frozen=True, kw_only=True)
class ModelDir:
    """A validated model directory. Voice packs are loaded (they are small) and shape-checked."""

    root: Path
    engine: str
    config: dict[str, Any]
    weights: Path
    voices: dict[str, np.ndarray]
    manifest: dict[str, Any]

    @property
    def vocab(self) -> dict[str, int]:
        vocab: dict[str, int] = self.config["vocab"]  # checked when the directory is opened
        return vocab


def open_model_dir(root: str | Path, *, engine: str | None = None) -> ModelDir:
    """Validate ``root`` and load its voice packs. ``engine`` None means: what the files say."""
    root = Path(root)
    if not root.is_dir():
        raise ModelDirError(f"{root}: model directory does not exist or is not a directory")
    manifest = _read_json(root / "manifest.json") if (root / "manifest.json").exists() else {}
    declared = manifest.get("engine")
    if declared is not None and declared not in ENGINES:
        raise ModelDirError(f"{root / 'manifest.json'}: engine must be one of {ENGINES}, got {declared!r}")
    chosen = engine or declared or _detect_engine(root)
    if chosen not in ENGINES:
        raise ModelDirError(f"engine must be one of {ENGINES}, got {chosen!r}")
    config = _read_json(root / "config.json")
    _check_config(root / "config.json", config, engine=chosen)
    weights = _single_file(root, ".pth" if chosen == "torch" else ".onnx", manifest.get("weights"))
    voices = load_voices(root / "voices")
    return ModelDir(
        root=root, engine=chosen, config=config, weights=weights, voices=voices, manifest=manifest
    )


def _detect_engine(root: Path) -> str:
    if any(root.glob("*.pth")):
        return "torch"
    if any(root.glob("*.onnx")):
        return "onnx"
    raise ModelDirError(
        f"{root}: no weights found (expected a .pth file for the torch engine or a .onnx file for "
        "the onnx engine)"
    )


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ModelDirError(f"{path}: missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelDirError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelDirError(f"{path}: expected a JSON object")
    return data


def _check_config(path: Path, config: dict[str, Any], *, engine: str) -> None:
    required = TORCH_CONFIG_KEYS if engine == "torch" else ("vocab",)
    missing = [key for key in required if key not in config]
    if missing:
        raise ModelDirError(f"{path}: missing keys {missing}")
    vocab = config["vocab"]
    if not isinstance(vocab, dict) or not vocab or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in vocab.items()
    ):
        raise ModelDirError(f"{path}: vocab must be a non-empty object of phoneme -> integer id")
    n_token = config.get("n_token")
    if isinstance(n_token, int) and max(vocab.values()) >= n_token:
        raise ModelDirError(f"{path}: vocab ids must be below n_token={n_token}")


def _single_file(root: Path, suffix: str, named: object) -> Path:
    if isinstance(named, str):
        path = root / named
        if not path.is_file():
            raise ModelDirError(f"{path}: missing (named by manifest.json)")
        return path
    found = sorted(root.glob(f"*{suffix}"))
    if not found:
        raise ModelDirError(f"{root}: missing the weights file (*{suffix})")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ModelDirError(f"{root}: several {suffix} files ({names}); name one in manifest.json")
    return found[0]


def load_voices(folder: Path) -> dict[str, np.ndarray]:
    """Load every voice pack in ``folder`` as float32 [510, 1, 256]; reject any other shape now."""
    if not folder.is_dir():
        raise ModelDirError(f"{folder}: missing (voice packs live in voices/<name>.pt or .npy)")
    voices: dict[str, np.ndarray] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".pt", ".npy"):
            continue
        name = path.stem
        if not _VOICE_NAME.match(name):
            raise ModelDirError(f"{path}: voice name {name!r} has characters outside [A-Za-z0-9_.-]")
        if name in voices:
            raise ModelDirError(f"{path}: voice {name!r} exists as both .pt and .npy")
        voices[name] = _load_pack(path)
    if not voices:
        raise ModelDirError(f"{folder}: no voice packs (.pt or .npy)")
    return voices


def _load_pack(path: Path) -> np.ndarray:
    try:
        if path.suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        else:
            import torch  # only .pt packs need it; the onnx layout can do without

            tensor = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(tensor, torch.Tensor):
                raise ModelDirError(f"{path}: expected a tensor, got {type(tensor).__name__}")
            array = tensor.detach().to(torch.float32).numpy()
    except ModelDirError:
        raise
    except Exception as exc:  # a truncated or foreign file: say which one
        raise ModelDirError(f"{path}: cannot read voice pack ({type(exc).__name__}: {exc})") from None
    if array.shape == (VOICE_SHAPE[0], VOICE_SHAPE[2]):
        array = array.reshape(VOICE_SHAPE)
    if tuple(array.shape) != VOICE_SHAPE:
        raise ModelDirError(f"{path}: voice pack has shape {tuple(array.shape)}, expected {VOICE_SHAPE}")
    if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
        raise ModelDirError(f"{path}: voice pack must hold finite floating-point values")
    return np.ascontiguousarray(array, dtype=np.float32)


def style_for(pack: np.ndarray, phonemes: str) -> np.ndarray:
    """Kokoro's style vector for an input of this length: row len(phonemes) - 1, shape [1, 256]."""
    index = min(max(len(phonemes), 1), VOICE_SHAPE[0]) - 1
    style: np.ndarray = pack[index]
    return style
