"""Supply chain, offline: every container requirement is pinned with ==, and nothing the images
install (nor anything installed in .venv-kokoro, the container's environment, transitive
dependencies included) is below the committed advisory floor (advisory_floors.json).

This is NOT a live vulnerability audit. pip-audit needs to reach the vulnerability databases and
CI reaches only PyPI; the floor list knows the advisories written into it and nothing newer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
REQUIREMENT_FILES = [
    REPO / "containers/kokoro/requirements.txt",
    REPO / "containers/kokoro/requirements-test.txt",
    REPO / "agent/requirements.txt",
]
DOCKERFILES = [REPO / "containers/kokoro/Dockerfile", REPO / "agent/Dockerfile"]
FLOORS: dict[str, Version] = {canonicalize_name(name): Version(entry["min"])
          for name, entry in json.loads((Path(__file__).parent / "advisory_floors.json").read_text())["floors"].items()}
KOKORO_SITE = REPO / ".venv-kokoro" / "lib"


def requirement_lines(path: Path) -> list[tuple[int, str]]:
    lines = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.append((number, line))
    return lines


def unpinned(lines: list[tuple[int, str]]) -> list[str]:
    """Lines that are not exactly ``name[extras]==version`` (options, URLs, ranges, bare names)."""
    problems = []
    for number, line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            problems.append(f"line {number}: {line!r} is not a requirement")
            continue
        specs = list(requirement.specifier)
        if requirement.url or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            problems.append(f"line {number}: {line!r} is not pinned with ==")
    return problems


def below_floor(pins: dict[str, Version]) -> list[str]:
    return [f"{name} {version} < {FLOORS[name]}" for name, version in sorted(pins.items())
            if name in FLOORS and version.release < FLOORS[name].release]


def pins_of(path: Path) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for _, line in requirement_lines(path):
        requirement = Requirement(line)
        pins[canonicalize_name(requirement.name)] = Version(next(iter(requirement.specifier)).version)
    return pins


@pytest.mark.parametrize("path", REQUIREMENT_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_container_requirement_is_pinned(path: Path) -> None:
    assert unpinned(requirement_lines(path)) == []


def test_the_pin_check_catches_unpinned_lines() -> None:
    lines = [(1, "torch>=2.10"), (2, "numpy"), (3, "httpx==0.28.*"), (4, "pkg @ https://example.com/p.whl"),
             (5, "-e ."), (6, "ok==1.0"), (7, "extra[x]==2.0")]
    problems = unpinned(lines)
    assert [p.split(":")[0] for p in problems] == ["line 1", "line 2", "line 3", "line 4", "line 5"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_images_install_only_the_pinned_requirements(path: Path) -> None:
    """Every pip install in an image takes a requirements file, the repository's own packages
    (--no-deps), or exact pins (pip itself), never a bare package name that would float."""
    text = path.read_text().replace("\\\n", " ")
    installs = re.findall(r"pip install ([^&\n]+)", text)
    assert installs
    for args in installs:
        words = [w for w in args.split() if not w.startswith("--") and not w.startswith("https://")]
        if "-r" in words:
            continue
        if all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9.]*", w) for w in words):
            assert below_floor({canonicalize_name(w.split("==")[0]): Version(w.split("==")[1]) for w in words}) == []
            continue
        assert "--no-deps" in args, f"{path.name}: `pip install {args.strip()}` may pull unpinned dependencies"
        assert all(w.startswith("/build/") for w in words), f"{path.name}: `pip install {args.strip()}` names a package"


@pytest.mark.parametrize("path", REQUIREMENT_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_pinned_requirements_are_at_or_above_the_advisory_floor(path: Path) -> None:
    assert below_floor(pins_of(path)) == []


def test_the_container_environment_is_at_or_above_the_advisory_floor() -> None:
    """Transitive dependencies too: .venv-kokoro is exactly what the container installs (plus the
    test-only packages). pip itself is left out: the image's pip is the base image's, not pinned."""
    installed: dict[str, Version] = {}
    for meta in KOKORO_SITE.glob("python*/site-packages/*.dist-info/METADATA"):
        head = meta.read_text(errors="replace").splitlines()[:10]
        fields = dict(line.split(": ", 1) for line in head if ": " in line)
        if "Name" in fields and "Version" in fields:
            installed[canonicalize_name(fields["Name"])] = Version(fields["Version"])
    if not installed:
        pytest.fail(".venv-kokoro is not installed (make install)")
    assert "torch" in installed and "starlette" in installed
    installed.pop("pip", None)
    assert below_floor(installed) == []


def test_the_floor_check_catches_an_old_version() -> None:
    assert below_floor({"torch": Version("2.9.1"), "h11": Version("0.14.0"), "numpy": Version("1.0")}) == [
        "h11 0.14.0 < 0.16.0", "torch 2.9.1 < 2.10.0"]
    assert below_floor({"torch": Version("2.13.0+cpu")}) == []  # local versions compare by release
