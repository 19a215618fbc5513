"""`make install`'s chromium step (scripts/ensure-chromium) as a real process, with apt-get and
chromium replaced on PATH by recorders (the real ones would change this machine)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-chromium"


def _bin(tmp_path: Path) -> Path:
    """A PATH with the shell tools the script uses and a recording apt-get; no chromium."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "id", "env"):
        os.symlink(shutil.which(tool), bin_dir / tool)  # type: ignore[arg-type]
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "apt.log"}\n')
    (bin_dir / "apt-get").chmod(0o755)
    return bin_dir


def _run(bin_dir: Path, *prefix: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(bin_dir)}
    return subprocess.run([*prefix, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="the root branch needs root; the non-root branch is tested below")
def test_as_root_it_updates_then_installs_chromium(tmp_path: Path) -> None:
    result = _run(_bin(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update", "install -y --no-install-recommends chromium"]


def test_without_root_it_prints_the_exact_command() -> None:
    setpriv = shutil.which("setpriv")
    prefix = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups") if setpriv and os.geteuid() == 0 else ()
    if os.geteuid() == 0 and not prefix:
        pytest.fail("setpriv (util-linux) is needed to run the non-root branch as root")
    # pytest's tmp_path is private to root; the unprivileged user needs a readable copy of it all.
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        bin_dir = _bin(root)
        script = root / "ensure-chromium"
        shutil.copy(SCRIPT, script)
        result = subprocess.run([*prefix, str(script)], env={"PATH": str(bin_dir)},
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        assert "sudo apt-get update && sudo apt-get install -y chromium" in result.stderr
        assert not (root / "apt.log").exists()


def test_present_chromium_means_nothing_to_do(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    (bin_dir / "chromium").write_text("#!/bin/sh\n")
    (bin_dir / "chromium").chmod(0o755)
    result = _run(bin_dir)
    assert result.returncode == 0 and result.stderr == ""
    assert not (tmp_path / "apt.log").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the root branch needs root")
def test_a_failing_apt_get_is_reported_and_the_install_goes_on(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    (bin_dir / "apt-get").write_text("#!/bin/sh\necho 'E: could not resolve deb.debian.org' >&2\nexit 100\n")
    result = _run(bin_dir)
    assert result.returncode == 0
    assert (
        "installing chromium failed (see above); retry with: apt-get update && apt-get install -y chromium"
        in result.stderr
    )
