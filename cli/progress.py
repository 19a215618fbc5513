"""Rich output helpers shared by the CLIs: consoles, deploy steps, byte progress, polling.

Consoles are built per call (not at import) so they pick up the current stdout/stderr and
terminal width, which is what Typer's CliRunner and piped output need.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

T = TypeVar("T")


def out_console() -> Console:
    """Console for reports (stdout)."""
    return Console(highlight=False, soft_wrap=True)


def err_console() -> Console:
    """Console for progress and errors (stderr), so stdout stays clean for --json."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def format_duration(seconds: float) -> str:
    """Render elapsed time as '1h 02m 03s' / '4m 05s' / '6s'."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def format_bytes(size: int) -> str:
    """Human-readable byte count (binary units)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


@dataclass
class Steps:
    """Numbered deploy steps with elapsed time; CDK's own output streams between them."""

    total: int
    console: Console = field(default_factory=err_console)
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        """Announce a step, then report how long it took (or that it failed)."""
        self.done += 1
        label = escape(f"[{self.done}/{self.total}] {title}")
        self.console.rule(f"[bold cyan]{label}", align="left")
        t0 = time.monotonic()
        try:
            yield
        except BaseException:
            self.console.print(f"[red]✗[/] {label} failed after {format_duration(time.monotonic() - t0)}")
            raise
        self.console.print(f"[green]✓[/] {label} ({format_duration(time.monotonic() - t0)})")

    def elapsed(self) -> str:
        """Total time since the first step."""
        return format_duration(time.monotonic() - self.started)


def byte_progress(console: Console | None = None) -> Progress:
    """A transfer bar (bytes, speed, ETA) for model downloads and S3 uploads."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console or err_console(),
        transient=False,
    )


@dataclass(frozen=True)
class PollResult[T]:
    """The last observation of a poll and whether it reached a terminal state in time."""

    value: T
    finished: bool
    elapsed_s: float


def poll_until(
    *,
    fetch: Callable[[], T],
    is_done: Callable[[T], bool],
    describe: Callable[[T], str],
    timeout_s: float,
    interval_s: float,
    console: Console | None = None,
) -> PollResult[T]:
    """Poll ``fetch`` until ``is_done`` or the timeout, showing a live status line with elapsed time."""
    console = console or err_console()
    t0 = time.monotonic()
    value = fetch()
    with console.status("") as status:
        while True:
            elapsed = time.monotonic() - t0
            status.update(f"{describe(value)} [dim]({format_duration(elapsed)} elapsed)[/]")
            if is_done(value):
                return PollResult(value=value, finished=True, elapsed_s=elapsed)
            if elapsed + interval_s > timeout_s:
                return PollResult(value=value, finished=False, elapsed_s=elapsed)
            time.sleep(interval_s)
            value = fetch()


def confirm(question: str) -> bool:
    """Ask on the terminal; end of input (e.g. a closed stdin) counts as 'no'."""
    try:
        return bool(click.confirm(question, default=False, err=True))
    except click.exceptions.Abort:
        return False
