"""English G2P runs offline: misaki with spaCy's model under its canonical name, espeak for OOV."""

from __future__ import annotations

import pytest

from kokoro_server.g2p import Phonemizer, language_of, sentence_jobs

pytestmark = pytest.mark.kokoro


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer()


def test_english_text_becomes_phonemes(phonemizer: Phonemizer) -> None:
    chunks = phonemizer.phonemize("Dr. Smith paid $3.50 for coffee.", voice="af_heart")
    assert len(chunks) == 1
    assert "dˈɑktəɹ" in chunks[0] and "sˈɛnts" in chunks[0]  # "Doctor", "cents": numbers are read


def test_unknown_words_fall_back_to_espeak(phonemizer: Phonemizer) -> None:
    (chunk,) = phonemizer.phonemize("Zorbleflax.", voice="af_heart")
    assert len(chunk) > 4


def test_long_text_is_cut_within_the_model_window(phonemizer: Phonemizer) -> None:
    text = ", ".join(["the quick brown fox jumps over the lazy dog"] * 20) + "."
    chunks = phonemizer.phonemize(text, voice="am_michael")
    assert len(chunks) > 1 and all(0 < len(c) <= 510 for c in chunks)


@pytest.mark.parametrize(("voice", "lang"), [
    ("af_heart", "a"), ("bf_emma", "b"), ("jf_alpha", "j"), ("zm_yunxi", "z"), ("ef_dora+af_bella", "e"),
    ("x", "a"), ("my_voice", "a"),  # a hand-added pack whose name names no language: American English
])
def test_language_follows_the_voice_prefix(voice: str, lang: str) -> None:
    assert language_of(voice) == lang


def test_an_explicit_language_overrides_the_voice() -> None:
    assert language_of("jf_alpha", "a") == "a" and language_of("af_heart", "j") == "j"


@pytest.mark.parametrize(("phonemes", "jobs"), [
    ("həlˈO ðˈɛɹ. zˈibɹəz zˈɪɡzˌæɡ. ɡˈʊd dˈA tə ju.", ["həlˈO ðˈɛɹ.", "zˈibɹəz zˈɪɡzˌæɡ.", "ɡˈʊd dˈA tə ju."]),
    ("“stˈɑp!” hi sˈɛd.", ["“stˈɑp!”", "hi sˈɛd."]),  # closing quotes stay with their sentence
    ("wˈʌn: tˈu; θɹˈi, fˈɔɹ.", ["wˈʌn: tˈu; θɹˈi, fˈɔɹ."]),  # clauses are not sentences
    ("θɹˈi pˈYnt wˈʌn", ["θɹˈi pˈYnt wˈʌn"]),
    ("", []),
])
def test_a_speak_with_several_sentences_becomes_one_model_job_per_sentence(phonemes: str, jobs: list[str]) -> None:
    assert sentence_jobs(phonemes) == jobs
