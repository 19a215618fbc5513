"""How much of the silence Kokoro puts before a chunk's speech its listener hears.

Kokoro pads each chunk with a boundary token, and on the real weights its duration predictor gives
that token 12-20 frames: 0.3-0.5 s of silence before every sentence, heard after the wait for the
first audio and again between sentences. The pad's frames are known once the front has run (the
engines' ``durations``), so the server drops all but the last few of them (:func:`kept_frames`)
from a chunk's first window, and the job sizer, which counts on the first window's audio to cover the
next window's decoding, knows beforehand how much less audio that window leaves queued.

Speech starts before the pad's frames end, and further before it the slower the speech: in renders
of 8 short sentences in five English voices on the int8 weights, the first sample above -60 dBFS
came up to 22.7 frames before the pad's last at speed 0.5, 9.5 at 0.8, 6.5 at 1, 4.9 at 1.25 and
2.7 at 2 (tests/kokoro/test_lead.py renders such sentences and checks that none loses its onset).
So the frames kept grow as the speed falls, faster below 1. The frames left out are still decoded:
rendering from a later frame changes the vocoder's instance-norm statistics over the span, and
without context before it the first samples click (docs/design-notes.md, "The silence before a
sentence").
"""

from __future__ import annotations

import math

import numpy as np

KEPT_FRAMES = 8
"""Frames of the pad kept before its end at speed 1 (200 ms): the onset's 6.5 frames, and a margin."""


def kept_frames(speed: float) -> int:
    """Frames of the start pad kept at ``speed``: :data:`KEPT_FRAMES` over the speed, over its
    square below 1 (the onsets measured above, each with a frame or more to spare)."""
    return math.ceil(KEPT_FRAMES / min(speed, speed * speed) - 1e-9)


def another_starves(others_s: float | None) -> bool:
    """Another listener with work has no audio queued (``others_s``, the least any other listener
    with work has, as the job sizer's Situation: 0 when one waits for its first audio or the decoder
    fell behind for it). A listener's silence, before its speech or after, is then sent whole."""
    return others_s is not None and others_s <= 0


def silent_lead(durations: np.ndarray | None, speed: float = 1.0, *, others_s: float | None = None) -> int:
    """Frames at the start of a chunk spoken at ``speed`` that its listener does not hear: its
    start pad's frames (``durations[0]``, frames per model token) but the last
    :func:`kept_frames`; 0 when the engine gave no durations, or while another listener has no
    audio queued (:func:`another_starves`). The silence is the cheapest buffer then: without it
    this listener's first window must be larger to keep up (the sizer's rule 4), and every
    listener queued behind it waits for those frames."""
    if another_starves(others_s) or durations is None or len(durations) < 1 or not speed > 0:
        return 0
    pad = float(np.asarray(durations, dtype=np.float64).reshape(-1)[0])
    if not np.isfinite(pad):
        return 0
    return max(0, int(pad) - kept_frames(speed))


def heard_part(first_window: np.ndarray, lead: int, samples_per_frame: int) -> np.ndarray:
    """A chunk's first window's audio less its ``lead`` silent frames (:func:`silent_lead`), but
    never less than one frame of it: a window shorter than its lead (the decoder was contended)
    sends the end of its silence rather than nothing."""
    cut = min(lead * samples_per_frame, max(0, first_window.size - samples_per_frame))
    return first_window[cut:]
