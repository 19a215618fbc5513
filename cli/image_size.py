"""`make image-size`: what the TTS image's Python layer weighs, from the pinned requirements.

pip resolves containers/kokoro/requirements.txt exactly as the Dockerfile installs it (Python 3.11,
linux x86_64, the cu128 index as an extra index) in ``--dry-run`` mode, and reports every
wheel it would download; the sizes are those files' (a local file's size, else the Content-Length
of the exact URL pip chose). That is the compressed download, close to what a pushed layer weighs
(a layer is gzip of the installed files); installed on disk the files take more. The base image is
not measured here: add its compressed size as ``--base-mb`` from its registry page.

    .venv/bin/python -m cli.image_size [--write infra/results/image-size.json] [--base-mb N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
REQUIREMENTS: Final = REPO / "containers/kokoro/requirements.txt"
CU128_INDEX: Final = "https://download.pytorch.org/whl/cu128"  # as containers/kokoro/Dockerfile
BASE_IMAGE: Final = "nvidia/cuda:12.8.1-base-ubuntu22.04"
PIP_PYTHON: Final = REPO / ".venv-kokoro/bin/python"
"""pip runs under the container's Python (3.11) on linux x86_64, so it picks the image's wheels;
pip's --platform would refuse the sdist-only dependencies (docopt)."""


def resolve(requirements: Path = REQUIREMENTS, *, python: Path = PIP_PYTHON) -> list[dict[str, Any]]:
    """pip's install report for the image's platform (no install)."""
    with tempfile.TemporaryDirectory(prefix="image-size-") as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--retries", "1",
             "--isolated",  # PyPI (and the cu128 index), not this machine's local mirrors or CPU wheels
             "--extra-index-url", CU128_INDEX,
             "--report", str(report), "-r", str(requirements)],
            check=True, timeout=1800)
        return list(json.loads(report.read_text())["install"])


def file_size(url: str) -> int:
    if url.startswith("file://"):
        return os.path.getsize(urllib.parse.unquote(url.removeprefix("file://")))
    request = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (https URLs from pip's report)
        return int(response.headers["Content-Length"])


def estimate(items: Sequence[dict[str, Any]], *, base_mb: float | None) -> dict[str, Any]:
    rows = []
    for item in items:
        url = str(item["download_info"]["url"])
        rows.append({"name": item["metadata"]["name"], "version": item["metadata"]["version"],
                     "bytes": file_size(url), "from": urllib.parse.urlparse(url).netloc or "local"})
    rows.sort(key=lambda row: -int(row["bytes"]))
    wheels = sum(int(row["bytes"]) for row in rows)
    cuda = sum(int(row["bytes"]) for row in rows if str(row["name"]).startswith(("nvidia-", "torch", "triton")))
    torch = next((row for row in rows if row["name"] == "torch"), None)
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "make image-size",
        "base_image": BASE_IMAGE,
        "base_mb": base_mb,
        "wheels": len(rows),
        "wheels_mb": round(wheels / 1e6, 1),
        "torch_and_cuda_wheels_mb": round(cuda / 1e6, 1),
        "torch": f"{torch['name']} {torch['version']} from {torch['from']}" if torch else None,
        "estimate_mb": round(wheels / 1e6 + (base_mb or 0), 1),
        "note": ("compressed download of the pinned wheels (pip --dry-run under Python 3.11, "
                 "linux x86_64, from PyPI and the cu128 index)"
                 + ("" if base_mb else "; base image not included (pass --base-mb)")
                 + ("" if torch and "+cu128" in str(torch["version"]) else
                    "; the cu128 index was not reachable, so torch is PyPI's Linux build of the pinned "
                    "version with the nvidia-* wheels it depends on, a stand-in for the cu128 build")),
        "largest": rows[:15],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.image_size", description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the estimate as JSON here")
    parser.add_argument("--base-mb", type=float, help="the base image's compressed size, from its registry")
    parser.add_argument("--python", type=Path, default=PIP_PYTHON,
                        help="a Python 3.11 on linux x86_64 to run pip with (default: .venv-kokoro's)")
    args = parser.parse_args(argv)
    result = estimate(resolve(python=args.python), base_mb=args.base_mb)
    text = json.dumps(result, indent=2) + "\n"
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
