"""How much of the silence after a chunk's speech its listener hears.

Kokoro ends a sentence with silence: on the int8 weights, in renders of 8 short sentences in five
English voices at speed 1, the last sample above -60 dBFS came a median 18 frames (0.45 s) before
the chunk's end. The end pad token holds only 1-5 of those frames; the rest belong to the sentence's
last tokens (its punctuation), so the durations do not say where speech ends, as they do for the
silence before it (lead.py). The audio does, once the chunk's last window is decoded: the server
sends that window up to :data:`KEPT_FRAMES` after its last sample above :data:`SILENCE`, so an
answer ends 0.2 s after its speech, and a pause between two sentences is that and what lead.py
keeps before the next one's speech. Kokoro-FastAPI trims its chunks' ends to 50 ms by level too.

The frames left out are decoded all the same: they are known to be silent only once rendered.
"""

from __future__ import annotations

import numpy as np

from .lead import another_starves

SILENCE = 10 ** (-60 / 20)
"""The level below which a sample counts as silence (-60 dBFS), as lead.py's onsets were measured."""
KEPT_FRAMES = 8
"""Frames kept after a chunk's last sample above SILENCE (200 ms): a sentence's own pause, shorter."""


def heard_end(last_window: np.ndarray, samples_per_frame: int, *, others_s: float | None = None,
              keep: int = 0) -> np.ndarray:
    """A chunk's last window's audio up to :data:`KEPT_FRAMES` after its last sample above
    :data:`SILENCE` (from its first sample when none is), never less than one frame nor its first
    ``keep`` samples (where its last word ends: the word times sent with the chunk's first window
    end within the audio). Whole while another listener has no audio queued
    (lead.another_starves): this listener's silence is then the cheaper buffer, as before a chunk."""
    if another_starves(others_s) or samples_per_frame < 1:
        return last_window
    loud = np.flatnonzero(np.abs(last_window) > SILENCE)
    speech_ends = int(loud[-1]) + 1 if loud.size else 0
    end = max(speech_ends + KEPT_FRAMES * samples_per_frame, samples_per_frame, keep)
    return last_window[:end]
