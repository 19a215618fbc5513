"""The one error an engine raises for an input it cannot synthesize (halt.Halted among them)."""

from __future__ import annotations


class EngineError(RuntimeError):
    """Synthesis failed for one input; the server reports it and keeps serving."""
