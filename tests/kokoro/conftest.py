"""Fixtures for the Kokoro container's tests: a tiny model built now, and the real server.

The server runs as `python -m kokoro_server serve` in a subprocess on 127.0.0.1, exactly as the
container starts it, and is shared by the session (importing torch costs ~15 s on these cores).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kokoro_harness import Server, start_server


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kokoro_tools.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny-model"))


SHARED_PACE = "0.15"


@pytest.fixture(scope="session")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The suite's shared server. Its pace is pinned (about what warm-up measures here), so it never
    refits its decoder cost mid-suite: tests compare two requests' audio byte for byte, and a refit
    between them would cut their windows differently (measuring and fitting: test_main, test_pace)."""
    running = start_server(tiny_model, tmp_path_factory.mktemp("server") / "server.log",
                           env={"KOKORO_DECODER_PACE": SHARED_PACE})
    yield running
    running.stop()


@pytest.fixture(scope="module")
def own_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server for one test module alone (tiny model, no warm-up): its figures (RSS, descriptors,
    tasks) are its own, and if it crashes no other module loses its server. It hands freed memory
    back 1 s after work, so the soak's RSS, read once it is settled, is what it holds."""
    running = start_server(tiny_model, tmp_path_factory.mktemp("own-server") / "server.log",
                           env={"KOKORO_WARMUP": "0", "KOKORO_MEMORY_TRIM_AFTER_S": "1"})
    yield running
    running.stop()
