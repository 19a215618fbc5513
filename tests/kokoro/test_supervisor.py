"""The container's `serve` supervisor (KOKORO_SUPERVISE=1, set by the image): started as root, as
SageMaker starts containers, it serves from an unprivileged process; a serving process that dies
is started again, with /ping failing until the model is back; a refusal to start is final.

The live tests run the supervisor from Debian's /usr/bin/python3.11 (on this machine the venv's
interpreter lives under /root, mode 0700, which an unprivileged process cannot execute; in the
image Python is in /opt/venv, readable by all) with the code, the model and the Kokoro
environment's packages in a folder under /tmp that every user can read (a copy of the code and
model; the packages through hard links, unless nobody can read them where they are), so they
hold wherever the repository is cloned, a 0700 folder from ``mktemp -d`` included."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from kokoro_harness import free_port
from waiting import wait_until

from kokoro_server.supervisor import EXIT_BAD_MODEL, MAX_RESTARTS, Supervisor, resolve_run_as

pytestmark = pytest.mark.kokoro

REPO = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
START_TIMEOUT_S = 180.0


def die_with(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize(("code", "status", "starts"), [
    ("raise SystemExit(0)", 0, 1),  # a clean exit ends the supervisor
    ("raise SystemExit(2)", 2, 1),  # a refusal to start is final
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 1, MAX_RESTARTS + 1),  # crash loop
    ("raise SystemExit(3)", 1, MAX_RESTARTS + 1),
])
def test_supervisor_decides_from_the_exit_status(code: str, status: int, starts: int, tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    command = die_with(f"open({str(counter)!r}, 'a').write('x'); {code}")
    supervisor = Supervisor(command=command, env=dict(os.environ), run_as=None, backoff_s=(0.01,))
    assert supervisor.run() == status
    assert len(counter.read_text()) == starts


def test_run_as_names_an_existing_unprivileged_user() -> None:
    if os.geteuid() != 0:
        assert resolve_run_as("nobody") is None  # not root: nothing to drop
        return
    nobody = resolve_run_as("nobody")
    assert nobody is not None and nobody.uid != 0
    assert resolve_run_as(str(nobody.uid)) == nobody
    for bad in ("no-such-user-here", "root", "0"):
        with pytest.raises(ValueError, match="KOKORO_RUN_AS"):
            resolve_run_as(bad)


@dataclass
class Supervised:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def child(self) -> int | None:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        pids = path.read_text().split() if path.exists() else []
        return int(pids[0]) if pids else None

    def ping_ok(self) -> bool:
        try:
            return httpx.get(f"{self.url}/ping", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self) -> int:
        def ready_child() -> int | None:
            assert self.process.poll() is None, self.log.read_text()  # the supervisor died: say why now
            child = self.child()
            return child if child is not None and self.ping_ok() else None

        child = wait_until(ready_child, until=lambda found: found is not None, timeout=START_TIMEOUT_S,
                           interval=0.3)
        assert child is not None, f"not ready in {START_TIMEOUT_S:.0f} s:\n{self.log.read_text()[-3000:]}"
        return child


def uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def readable_to_nobody(path: Path) -> bool:
    """Asked of a process running as nobody."""
    check = "import os, sys; sys.exit(not os.access(sys.argv[1], os.R_OK | os.X_OK))"
    return subprocess.run([str(DEBIAN_PYTHON), "-c", check, str(path)], user="nobody", group="nogroup",
                          extra_groups=[], check=False).returncode == 0


@pytest.fixture
def tree(tiny_model: Path) -> Iterator[Path]:
    """A folder nobody can read holding ``code`` (kokoro_server, voicestream), ``model`` and
    ``site`` (the packages), wherever the repository and the test's temporary folders are."""
    if os.geteuid() != 0:
        pytest.fail("this test checks the drop from root; CI and the container run as root")
    assert DEBIAN_PYTHON.exists(), "Debian's python3.11 is needed to run unprivileged here"
    root = Path(tempfile.mkdtemp(prefix="kokoro-supervised-", dir="/tmp"))
    try:
        skip = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / "containers" / "kokoro" / "kokoro_server", root / "code" / "kokoro_server", ignore=skip)
        shutil.copytree(REPO / "voicestream" / "src" / "voicestream", root / "code" / "voicestream", ignore=skip)
        shutil.copytree(tiny_model, root / "model")
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
        site = Path(sysconfig.get_paths()["purelib"])
        if readable_to_nobody(site):
            (root / "site").symlink_to(site)
        elif subprocess.run(["cp", "-al", str(site), str(root / "site")], check=False).returncode != 0:
            subprocess.run(["cp", "-a", str(site), str(root / "site")], check=True)  # another filesystem
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def start(root: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``python -m kokoro_server serve`` as the image starts it: as root, supervised, dropping to nobody."""
    env = {**os.environ, "KOKORO_SUPERVISE": "1", "KOKORO_RUN_AS": "nobody", "KOKORO_WARMUP": "0",
           "PYTHONPATH": os.pathsep.join(str(root / name) for name in ("code", "site")), "PYTHONUNBUFFERED": "1"}
    env.pop("KOKORO_MODEL_DIR", None)
    with log.open("wb") as handle:
        return subprocess.Popen(
            [str(DEBIAN_PYTHON), "-m", "kokoro_server", "serve", "--model-dir", str(root / "model"),
             "--host", "127.0.0.1", "--port", str(port)],
            cwd="/tmp", env=env, stdout=handle, stderr=subprocess.STDOUT,
        )


@pytest.fixture
def supervised(tree: Path, tmp_path: Path) -> Iterator[Supervised]:
    port = free_port()
    log = tmp_path / "supervisor.log"
    process = start(tree, port, log)
    running = Supervised(process=process, url=f"http://127.0.0.1:{port}", log=log)
    try:
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.mark.parametrize(("closed", "named"), [("model", "the model directory"), ("code", "the kokoro_server package")])
def test_refuses_in_one_line_when_the_user_cannot_read_the_model_or_the_code(
    tree: Path, tmp_path: Path, closed: str, named: str,
) -> None:
    (tree / closed).chmod(0o700)
    log = tmp_path / "supervisor.log"
    process = start(tree, free_port(), log)
    try:
        assert process.wait(60) == EXIT_BAD_MODEL
    finally:
        if process.poll() is None:
            process.kill()
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines  # nothing was started: no import error, no retries
    assert "cannot start" in lines[0] and "user nobody" in lines[0] and f"({named})" in lines[0], lines
    assert f"{tree / closed} (mode 0700) is closed to it" in lines[0], lines


def test_serves_unprivileged_restarts_after_a_crash_and_stops_on_sigterm(supervised: Supervised) -> None:
    first = supervised.wait_ready()
    assert uid_of(supervised.process.pid) == 0 and uid_of(first) != 0
    os.kill(first, signal.SIGSEGV)  # what a libav crash looks like from outside
    answering = wait_until(supervised.ping_ok, until=lambda ok: not ok, timeout=30, interval=0.05)
    assert not answering, "/ping must fail while the model is not back"  # the dead one stops answering
    second = supervised.wait_ready()
    assert second != first and uid_of(second) != 0
    log = supervised.log.read_text()
    assert "died (signal SIGSEGV)" in log and "restarting" in log
    supervised.process.send_signal(signal.SIGTERM)
    assert supervised.process.wait(60) == 0
    assert not Path(f"/proc/{second}").exists()
