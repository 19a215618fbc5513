"""What every engine offers: phonemes, a style vector and a speed in; 24 kHz mono audio out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from voicestream.protocol import NATIVE_SAMPLE_RATE

from .errors import EngineError
from .windows import Decoding

if TYPE_CHECKING:
    from .halt import Halt

__all__ = ["MAX_PHONEMES", "Engine", "EngineError", "Synthesis"]

MAX_PHONEMES = 510  # Kokoro's context is 512 tokens including the two pad tokens


@dataclass(frozen=True, kw_only=True)
class Synthesis:
    """One synthesized phoneme chunk. ``durations`` holds frames per input token where known."""

    audio: np.ndarray  # float32, mono, NATIVE_SAMPLE_RATE (Kokoro's output rate)
    durations: np.ndarray | None = None

    @property
    def seconds(self) -> float:
        return len(self.audio) / NATIVE_SAMPLE_RATE


class Engine(Protocol):
    """A loaded Kokoro model. ``synthesize`` is called from one worker thread at a time."""

    name: str
    device: str

    def begin(self, phonemes: str, style: np.ndarray, speed: float, *, halt: Halt | None = None) -> Decoding:
        """Run the front once; the result decodes the chunk a window at a time (``step``).
        ``halt`` stops the front early (halt.Halted)."""
        ...

    def synthesize(self, phonemes: str, style: np.ndarray, speed: float) -> Synthesis:
        """``phonemes``: at most MAX_PHONEMES; ``style``: float32 [1, 256] from the voice pack."""
        ...
