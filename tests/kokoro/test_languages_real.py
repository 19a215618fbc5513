"""Each of Kokoro's nine languages spoken through the real int8 weights by one of its voices.

Through the server's own Synthesizer (G2P, windows, word timings) on the real onnx engine: the
phonemes each model job is sent must be kokoro's own reading of the sentence for that language
(``KPipeline(lang_code, model=False)``) and not the English one, the audio must be one human voice
speaking, and every word event must point at its own characters of the text. No offline recognizer
for the eight other languages ships its model on PyPI (bench/languages.py), so by ear only English
is judged, by pocketsphinx (test_speech_content.py); ``python -m bench.languages`` records the rest.
"""

from __future__ import annotations

import pytest
import real_audio as ra

from bench.languages import SENTENCES, kokoro_reading, speak
from voicestream.protocol import NATIVE_SAMPLE_RATE

pytestmark = pytest.mark.kokoro


@pytest.mark.parametrize("lang", list(SENTENCES))
def test_each_language_speaks_its_own_reading_through_the_real_model(lang: str) -> None:
    voice, text = SENTENCES[lang]
    assert voice in ra.model().voices, f"{voice}: the model directory serves every language's voices"
    spoken = speak(ra.model(), ra.engine(), text, voice=voice)
    sent = " ".join(spoken.sent)
    assert sent == kokoro_reading(text, lang)
    if lang not in ("a", "b"):
        assert sent != kokoro_reading(text, "a")
    ra.assert_speech(spoken.audio, what=f"{voice} ({lang})")
    seconds = len(spoken.audio) / NATIVE_SAMPLE_RATE
    assert 0.03 <= seconds / len(text) <= 0.5, f"{seconds:.2f} s for {len(text)} characters"
    assert spoken.words, "word events for every language"
    cursor = 0
    for word in spoken.words:
        assert text[word.char_start:word.char_end] == word.text and word.char_start >= cursor
        assert 0 <= word.start_ms <= word.end_ms <= seconds * 1000 + 1
        cursor = word.char_end


def test_a_japanese_voice_told_to_read_english_reads_english() -> None:
    """``lang`` overrides the voice: jf_alpha with lang a sends the English reading to the model."""
    text = SENTENCES["a"][1]
    spoken = speak(ra.model(), ra.engine(), text, voice="jf_alpha", lang="a")
    assert " ".join(spoken.sent) == kokoro_reading(text, "a")
    ra.assert_speech(spoken.audio, what="jf_alpha reading English")
