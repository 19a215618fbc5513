"""bench.engine_sides' Counted engine: what the engine-vs-loop tables report as frames decoded per
frame heard. Every decoder call is counted with its context, one-shot or windowed, on the tiny model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.engine_sides import Counted
from kokoro_server.engines import load_engine
from kokoro_server.model_dir import open_model_dir, style_for

pytestmark = pytest.mark.kokoro

PHONEMES = "ðɪs ɪz ɐ lˈɔŋɡɚ tˈɛst sˈɛntəns, sˈoʊ ɪt hɐz sˈɛvɹəl wˈɪndoʊz tə dɪkˈoʊd."


@pytest.fixture(scope="module")
def counted(tiny_model: Path) -> tuple[Counted, Any]:
    model = open_model_dir(tiny_model)
    pack = model.voices["af_heart"]
    return Counted(load_engine(model)), style_for(pack, PHONEMES)


def test_windows_are_counted_with_their_context(counted: tuple[Counted, Any]) -> None:
    engine, style = counted
    engine.reset()
    decoding = engine.begin(PHONEMES, style, 1.0)
    heard = decoding.frames
    decoding.step(heard // 3)
    decoding.step(heard)
    assert decoding.done
    assert engine.calls == 2
    assert engine.frames == sum(w.hi - w.lo for w in decoding.windows)
    assert engine.frames > heard  # both windows decoded context the listener never hears


def test_a_one_shot_render_is_one_call_of_exactly_its_frames(counted: tuple[Counted, Any]) -> None:
    engine, style = counted
    engine.reset()
    synthesis = engine.synthesize(PHONEMES, style, 1.0)
    assert engine.calls == 1
    assert synthesis.durations is not None
    assert engine.frames == int(synthesis.durations.sum())
    assert synthesis.audio.size > 0
