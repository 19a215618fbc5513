"""Start the Kokoro server as SageMaker would run the container: ``serve``, /ping before traffic.

The launch itself is the project's one launcher (voicestream.launch); this adds what the stand-in
needs: its inputs checked by name before anything starts, and the container's base URL."""

from __future__ import annotations

import signal
from pathlib import Path

from voicestream.launch import KokoroProcess

READY_TIMEOUT_S = 180.0


class ContainerProcess:
    """One Kokoro server subprocess in its own environment (torch lives there, not here)."""

    def __init__(self, *, python: Path, model_dir: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        if not python.exists():
            raise RuntimeError(f"kokoro_python: {python} not found; run `make install`")
        if not model_dir.is_dir():
            raise RuntimeError(f"model_dir: {model_dir} is not a directory (make local-model / make tiny-model)")
        self._server = KokoroProcess(python=python, model_dir=model_dir, host=host, port=port,
                                     stop_signal=signal.SIGINT)

    def start(self) -> str:
        """Start it and wait for /ping; the container's base URL (LaunchError, a RuntimeError, if not)."""
        self._server.start(timeout_s=READY_TIMEOUT_S)
        return self._server.url

    def stop(self) -> None:
        self._server.stop(timeout_s=10)
