"""bench.lanes_speech's lane engine on the real int8 weights: one intra-op thread, and two runs at
once from two threads speak what one run alone does, so the bench's lanes side (two model jobs at
once, docs/design-notes.md) measures real decoding (the figures are the bench's, not this test's)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import real_audio as ra

from bench.lanes_speech import lane_engine

pytestmark = pytest.mark.kokoro


def test_two_runs_at_once_on_the_lane_engine_speak_as_one_alone() -> None:
    from kokoro_server.g2p import Phonemizer
    from kokoro_server.model_dir import open_model_dir, style_for

    model_dir = ra.packaged_dir()
    engine = lane_engine(model_dir)
    assert engine.threads == 1
    (phonemes,) = Phonemizer().phonemize("Start with where the router sits.", voice="af_heart")
    style = style_for(open_model_dir(model_dir).voices["af_heart"], phonemes)
    alone = engine.synthesize(phonemes, style, 1.0).audio
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda _: engine.synthesize(phonemes, style, 1.0).audio, range(2)))
    assert alone.size > 24_000  # over a second of speech
    for audio in both:
        np.testing.assert_allclose(audio, alone, atol=1e-4)
