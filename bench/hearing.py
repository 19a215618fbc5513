"""What a listener hears: pocketsphinx's transcript of 24 kHz speech, and its word error rate.

One place for the judge that the benches and the speech tests share (normalization, windows,
speech content), so every "heard the right words" figure is scored the same way.
"""

from __future__ import annotations

import re

import numpy as np

from voicestream.protocol.audio import NATIVE_SAMPLE_RATE

#: pocketsphinx's US English model is trained on 16 kHz audio.
RECOGNISER_RATE = 16_000


def words(text: str) -> list[str]:
    """The lower-case words of ``text`` as the scorer compares them (letters and apostrophes)."""
    return re.findall(r"[a-z']+", text.lower())


def recognise(audio: np.ndarray) -> list[str]:
    """The words pocketsphinx hears in ``audio`` (float samples at the native rate)."""
    from pocketsphinx import Decoder

    n = int(len(audio) * RECOGNISER_RATE / NATIVE_SAMPLE_RATE)
    resampled = np.interp(np.arange(n) * (NATIVE_SAMPLE_RATE / RECOGNISER_RATE), np.arange(len(audio)), audio)
    decoder = Decoder(samprate=RECOGNISER_RATE, loglevel="FATAL")
    decoder.start_utt()
    decoder.process_raw((np.clip(resampled, -1, 1) * 32767).astype("<i2").tobytes(), full_utt=True)
    decoder.end_utt()
    hypothesis = decoder.hyp()
    return words(hypothesis.hypstr) if hypothesis is not None else []


def wer(heard: list[str], reference: str) -> float:
    """Word error rate of ``heard`` against ``reference``: (substitutions + deletions + insertions)
    / reference words, by word-level Levenshtein distance."""
    wanted = words(reference)
    row = list(range(len(heard) + 1))
    for i, word in enumerate(wanted, start=1):
        previous, row[0] = row[0], i
        for j, got in enumerate(heard, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != got))
    return row[-1] / max(1, len(wanted))
