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
"""

from __future__ import annotations

import logging
import os
import pwd
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from . import metrics

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
    return RunAs(uid=entry.pw_uid, gid=entry.pw_gid, home=home)


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
    env = {**os.environ, "KOKORO_SUPERVISE": "0"}  # the serving process serves; it does not supervise
    supervisor = Supervisor(command=[sys.executable, "-m", "kokoro_server", *argv], env=env, run_as=run_as)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, supervisor.stop)
    return supervisor.run()
