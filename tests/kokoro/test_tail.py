"""The silence after a chunk's speech (kokoro_server/tail.py): what of it is sent, and that a served
answer ends, and pauses between its sentences, that much after its speech on the real weights."""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_server.tail import KEPT_FRAMES, SILENCE, heard_end

pytestmark = pytest.mark.kokoro

SPF = 600  # samples a frame


def _speech_then_silence(speech_frames: int, silent_frames: int) -> np.ndarray:
    audio = np.zeros((speech_frames + silent_frames) * SPF, dtype=np.float32)
    audio[:speech_frames * SPF] = 0.3
    audio[speech_frames * SPF:] = SILENCE / 2  # a tail below the level: silence
    return audio


def test_the_silence_after_the_speech_is_cut_to_the_kept_frames() -> None:
    audio = _speech_then_silence(30, 20)
    np.testing.assert_array_equal(heard_end(audio, SPF), audio[:(30 + KEPT_FRAMES) * SPF])


def test_a_short_tail_is_all_kept() -> None:
    audio = _speech_then_silence(30, KEPT_FRAMES - 3)
    np.testing.assert_array_equal(heard_end(audio, SPF), audio)


def test_the_last_word_is_kept_whole() -> None:
    """Word times went out with the chunk's first window: a word that ends in the silence (its last
    phoneme's frames outlast its sound) keeps the audio up to its end."""
    audio = _speech_then_silence(30, 20)
    assert heard_end(audio, SPF, keep=45 * SPF).size == 45 * SPF
    assert heard_end(audio, SPF, keep=10 * SPF).size == (30 + KEPT_FRAMES) * SPF


def test_a_window_without_speech_keeps_the_kept_frames_and_at_least_one() -> None:
    silent = np.zeros(40 * SPF, dtype=np.float32)
    assert heard_end(silent, SPF).size == KEPT_FRAMES * SPF  # the speech ended in the window before
    assert heard_end(np.zeros(SPF // 2, dtype=np.float32), SPF).size == SPF // 2  # shorter than a frame: all


def test_the_tail_is_sent_while_another_listener_has_no_audio() -> None:
    audio = _speech_then_silence(30, 20)
    assert heard_end(audio, SPF, others_s=0.0).size == audio.size  # one waits for its first audio
    assert heard_end(audio, SPF, others_s=1.5).size == (30 + KEPT_FRAMES) * SPF


@pytest.mark.real_model
def test_a_served_answer_ends_and_pauses_the_kept_frames_after_its_speech() -> None:
    """Through the synthesizer on the int8 weights: each sentence's audio ends KEPT_FRAMES after its
    last sample above the level, or where its last word ends if later, where the model's own render
    went on for longer."""
    import real_audio as ra

    from kokoro_server.model_dir import style_for

    texts, voice = ["Meet me at nine fifteen tomorrow.", "Bring the blue folder, please."], "af_heart"
    for text in texts:
        chunks = ra.served(text, voice)
        audio = np.concatenate([c.synthesis.audio for c in chunks])
        speech_ends = int(np.flatnonzero(np.abs(audio) > SILENCE)[-1]) + 1
        words_end = max(w.end_ms for c in chunks for w in c.words) * 24  # samples: the last word is kept whole
        assert audio.size == pytest.approx(max(speech_ends + KEPT_FRAMES * SPF, words_end), abs=24), text
        (phonemes,) = ra.phonemizer().phonemize(text, voice=voice, lang=ra.ENGLISH)
        rendered = ra.engine().synthesize(phonemes, style_for(ra.model().voices[voice], phonemes), 1.0).audio
        rendered_tail = rendered.size - (int(np.flatnonzero(np.abs(rendered) > SILENCE)[-1]) + 1)
        assert rendered_tail > KEPT_FRAMES * SPF, (text, rendered_tail)  # there was silence to leave out
