"""The container's ``serve``: start the serving process unprivileged, and start it again if it dies.

SageMaker runs the container as root ("SageMaker AI expects all containers to run with root
users", AWS's inference-container guide), but nothing that parses client input should. The
supervisor stays root only to spawn: the serving process runs as ``KOKORO_RUN_AS`` (a user name or
uid; the image's ``kokoro``, uid 1000).

If the serving process dies of something of its own (a signal, an unexpected exit status), the
supervisor logs the status and starts it again after a short back-off. Until the new one has
loaded and warmed up the model nothing listens on the port, so ``/ping`` fails and SageMaker sees
an unhealthy container rather than a live socket in front of a dead model. A start-up refusal
(exit 2: a bad model directory or setting) is not retried: it would fail the same way forever.
Too many deaths in a short time (``MAX_RESTARTS`` in ``RESTART_WINDOW_S``) end the supervisor with
status 1, so the platform replaces the instance instead of watching a crash loop.

On SIGTERM, SIGINT or SIGHUP the supervisor passes SIGTERM on, waits for the serving process to
finish its shutdown, and exits 0.

Before the first start it checks, from a child that drops to that user, that the user can read
what the serving process needs (:func:`needed_paths`: the interpreter, the packages it imports,
every file of the model directory). A folder closed to it (a checkout in a 0700 folder, a model
copied in by root with a 0600 umask) stops the supervisor with one line naming the path and the
user, exit 2, instead of six starts that each fail to import or load.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import pwd
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from . import metrics
from .config import SAGEMAKER_MODEL_DIR

log = logging.getLogger("kokoro_server.supervisor")

EXIT_BAD_MODEL = 2  # the serving process refused to start: retrying cannot help
MAX_RESTARTS = 5
RESTART_WINDOW_S = 300.0
BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)
STOP_GRACE_S = 30.0
DEFAULT_RUN_AS = "kokoro"


@dataclass(frozen=True, kw_only=True)
class RunAs:
    """Who the serving process runs as."""

    uid: int
    gid: int
    home: str
    name: str = ""


def resolve_run_as(name: str | None) -> RunAs | None:
    """The account to drop to, or None when we are not root (nothing to drop).

    Raises ValueError naming KOKORO_RUN_AS when the account does not exist, or is root itself."""
    if os.geteuid() != 0:
        return None
    wanted = name or DEFAULT_RUN_AS
    try:
        entry = pwd.getpwuid(int(wanted)) if wanted.isdigit() else pwd.getpwnam(wanted)
    except (KeyError, OverflowError):
        raise ValueError(f"KOKORO_RUN_AS: no such user {wanted!r} to run the server as") from None
    if entry.pw_uid == 0:
        raise ValueError("KOKORO_RUN_AS: must name an unprivileged user, not root")
    home = entry.pw_dir if os.path.isdir(entry.pw_dir) else "/tmp"
    return RunAs(uid=entry.pw_uid, gid=entry.pw_gid, home=home, name=entry.pw_name)


# The packages the serving process imports from outside the standard library (those installed).
PACKAGES = ("kokoro_server", "voicestream", "uvicorn", "starlette", "numpy", "kokoro", "misaki", "onnxruntime")
MODEL_DIR = "the model directory"
MAX_MODEL_FILES = 10_000


def model_dir_of(argv: Sequence[str], env: dict[str, str]) -> str | None:
    """The model directory ``serve`` will read: --model-dir, KOKORO_MODEL_DIR, else SageMaker's."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--model-dir")
    given = parser.parse_known_args(list(argv))[0].model_dir or env.get("KOKORO_MODEL_DIR")
    return given or (str(SAGEMAKER_MODEL_DIR) if SAGEMAKER_MODEL_DIR.exists() else None)


def needed_paths(model_dir: str | None) -> list[tuple[str, str]]:
    """(path, what it is) for each thing the serving process reads: the interpreter, the standard
    library, each package's folder, and every file and folder of the model directory."""
    paths = [(sys.executable, "the Python interpreter"), (sysconfig.get_paths()["stdlib"], "the standard library")]
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)  # finds, does not import
        if spec is not None and spec.submodule_search_locations:
            paths.append((list(spec.submodule_search_locations)[0], f"the {name} package"))
    if model_dir:
        paths.append((model_dir, MODEL_DIR))
        for top, dirs, files in os.walk(model_dir):  # as root: the child checks each one
            paths += [(os.path.join(top, entry), MODEL_DIR) for entry in dirs + files]
            if len(paths) > MAX_MODEL_FILES:
                break
    return [(os.path.realpath(path), what) for path, what in paths]  # a link's target is what is read


def _closed(path: str) -> str:
    """The first folder on the way to ``path`` this process cannot enter, else ``path`` itself."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts)):
        folder = os.sep.join(parts[:i])
        if not os.access(folder, os.X_OK):
            return folder
    return path


def _unreadable(paths: Sequence[tuple[str, str]]) -> str:
    """In the dropped child: the first unreadable path, what it is and the folder closed on the
    way to it, joined by NULs; "" when all can be read."""
    for path, what in paths:
        wanted = os.R_OK | (os.X_OK if what == "the Python interpreter" or os.path.isdir(path) else 0)
        if not os.access(path, wanted):
            return "\0".join((path, what, _closed(path)))
    return ""


def unreadable_for(run_as: RunAs, paths: Sequence[tuple[str, str]]) -> str | None:
    """Why ``run_as`` cannot read one of ``paths`` (checked by a child that drops to it, as the
    serving process will), or None when it can read them all (or the check itself failed)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop, check, report; no cleanup of the parent's state
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(run_as.gid)
            os.setuid(run_as.uid)
            os.write(write_end, os.fsencode(_unreadable(paths)))
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        found = os.fsdecode(reader.read())
    _, status = os.waitpid(pid, 0)
    if not found or os.waitstatus_to_exitcode(status) != 0:
        return None
    path, what, closed = found.split("\0")
    try:
        mode = f" (mode {stat.S_IMODE(os.stat(closed).st_mode):04o})"
    except OSError:
        mode = ""
    return (f"user {run_as.name or run_as.uid} (uid {run_as.uid}, KOKORO_RUN_AS) cannot read {path} ({what}): "
            f"{closed}{mode} is closed to it; make it readable to that user (chmod a+rX, and the folders above it)")


def describe(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Supervisor:
    """Runs one serving process at a time and decides, when it ends, whether to start another."""

    def __init__(
        self, *, command: Sequence[str], env: dict[str, str], run_as: RunAs | None,
        backoff_s: Sequence[float] = BACKOFF_S,
    ) -> None:
        self._command = list(command)
        self._backoff_s = tuple(backoff_s)
        self._env = env
        self._run_as = run_as
        self._child: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self._deaths: deque[float] = deque()

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self._run_as is None:
            return subprocess.Popen(self._command, env=self._env)
        env = {**self._env, "HOME": self._run_as.home}
        return subprocess.Popen(self._command, env=env, user=self._run_as.uid,
                                group=self._run_as.gid, extra_groups=[])

    def stop(self, signum: int, _frame: object = None) -> None:
        """Signal handler: pass SIGTERM to the serving process; the loop then exits."""
        self._stopping = True
        child = self._child
        if child is not None and child.poll() is None:
            log.info("supervisor: %s received, stopping the serving process", signal.Signals(signum).name)
            child.send_signal(signal.SIGTERM)

    def _wait(self, child: subprocess.Popen[bytes]) -> int:
        """Its exit status; once stopping, a SIGKILL after STOP_GRACE_S if SIGTERM is ignored."""
        deadline: float | None = None
        while True:
            try:
                return child.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                if not self._stopping:
                    continue
                deadline = deadline or time.monotonic() + STOP_GRACE_S
                if time.monotonic() > deadline:
                    log.warning("supervisor: the serving process ignored SIGTERM for %.0f s: killing it",
                                STOP_GRACE_S)
                    child.kill()

    def run(self) -> int:
        restarts = 0
        while True:
            self._child = self._spawn()
            log.info("supervisor: serving process %d started%s", self._child.pid,
                     f" as uid {self._run_as.uid}" if self._run_as else "")
            code = self._wait(self._child)
            if self._stopping:
                return 0
            if code == 0:
                log.info("supervisor: the serving process exited cleanly")
                return 0
            if code == EXIT_BAD_MODEL:
                log.error("supervisor: the serving process refused to start (%s): not restarting", describe(code))
                return code
            now = time.monotonic()
            self._deaths.append(now)
            while self._deaths and now - self._deaths[0] > RESTART_WINDOW_S:
                self._deaths.popleft()
            if len(self._deaths) > MAX_RESTARTS:
                log.error("supervisor: the serving process died %d times in %.0f s (last: %s): giving up",
                          len(self._deaths), RESTART_WINDOW_S, describe(code))
                return 1
            delay = self._backoff_s[min(restarts, len(self._backoff_s) - 1)]
            restarts += 1
            metrics.emit(metrics.RESTART, reason=describe(code))
            log.error("supervisor: the serving process died (%s); /ping fails until it is back; "
                      "restarting in %.1f s (restart %d)", describe(code), delay, restarts)
            time.sleep(delay)
            if self._stopping:
                return 0


def supervise(argv: Sequence[str]) -> int:
    """Run ``python -m kokoro_server <argv>`` unsupervised under a Supervisor; return its status."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_as = resolve_run_as(os.environ.get("KOKORO_RUN_AS"))
    except ValueError as exc:
        print(f"kokoro-server: cannot start: {exc}", file=sys.stderr)
        return EXIT_BAD_MODEL
    if run_as is not None:
        problem = unreadable_for(run_as, needed_paths(model_dir_of(argv, dict(os.environ))))
        if problem is not None:
            print(f"kokoro-server: cannot start: {problem}", file=sys.stderr)
            return EXIT_BAD_MODEL
    env = {**os.environ, "KOKORO_SUPERVISE": "0"}  # the serving process serves; it does not supervise
    supervisor = Supervisor(command=[sys.executable, "-m", "kokoro_server", *argv], env=env, run_as=run_as)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, supervisor.stop)
    return supervisor.run()
