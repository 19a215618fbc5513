"""Word timestamps from Kokoro's predicted durations: offsets, order, coverage, and real speech.

The pipeline tests run the real Synthesizer (G2P, scheduler, engine) on the tiny torch model
and on the real Kokoro-82M int8 ONNX export (whose durations output the model directory build
adds). The last test checks the times against the audio itself: a word boundary must fall on
quiet audio more often than a random cut point does.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest
import real_audio as ra

from kokoro_server.engines import Engine, load_engine
from kokoro_server.g2p import Phonemizer, chunk_jobs
from kokoro_server.model_dir import ModelDir, open_model_dir
from kokoro_server.scheduler import Scheduler
from kokoro_server.speech import Speech
from kokoro_server.synth import Synthesizer
from kokoro_server.words import ChunkWord, TextAligner, WordTiming, phoneme_frame_starts
from voicestream.chunker import iter_sentences
from voicestream.protocol.normalization import NORMALIZE_NONE

pytestmark = pytest.mark.kokoro

MARKDOWN = "**Hello** there, [my friend](https://example.com/page). It's a *fine* day; isn't it?\n\n- Yes!"
SPOKEN = ["Hello", "there", "my", "friend", "It's", "a", "fine", "day", "isn't", "it", "Yes"]
LONG = ("The ship left the harbour at dawn, and by noon the coast had vanished behind the grey waves. "
        "Nobody on board said a word until the captain walked out onto the deck.")


def speak_words(model: ModelDir, engine: Engine, text: str, voice: str) -> tuple[list[WordTiming], np.ndarray]:
    """(words, audio) of one Speech through the real Synthesizer and scheduler, cut as POST cuts it."""
    async def scenario() -> tuple[list[WordTiming], np.ndarray]:
        scheduler = Scheduler(workers=1)
        await scheduler.start()
        synth = Synthesizer(engine=engine, voices=model.voices, scheduler=scheduler, vocab=model.vocab)
        try:
            speech = Speech(synth, owner=object(), pieces=iter_sentences(text), text=text, voice=voice, speed=1.0,
                            lang=ra.ENGLISH)  # the texts are English, whatever the voice
            chunks = [c async for c in speech]
        finally:
            await scheduler.stop()
            synth.close()
        words = [w for c in chunks for w in c.words]
        return words, np.concatenate([c.synthesis.audio for c in chunks])
    return asyncio.run(scenario())


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> tuple[ModelDir, Engine]:
    model = open_model_dir(tiny_model)
    return model, load_engine(model)


def assert_well_formed(words: list[WordTiming], text: str, audio_ms: float) -> None:
    starts = [w.start_ms for w in words]
    assert starts == sorted(starts), "start times go back"
    for before, after in zip(words, words[1:]):
        assert before.end_ms <= after.start_ms, (before, after)
        assert before.char_end <= after.char_start, (before, after)
    for word in words:
        assert 0 <= word.start_ms <= word.end_ms <= audio_ms + 1, (word, audio_ms)
        assert text[word.char_start:word.char_end] == word.text


def test_every_word_of_the_users_text_is_present_once_with_its_offsets(tiny: tuple[ModelDir, Engine]) -> None:
    model, engine = tiny
    words, audio = speak_words(model, engine, MARKDOWN, "af_heart")
    assert [w.text for w in words] == SPOKEN  # markup and the link's URL are not words; nothing twice
    assert_well_formed(words, MARKDOWN, len(audio) / 24)
    assert MARKDOWN[words[0].char_start:words[0].char_end] == "Hello" and words[0].char_start == 2
    assert words[-1].end_ms > words[0].end_ms  # sentence chunks are offset by the audio before them


def test_g2p_words_map_to_their_phonemes() -> None:
    (chunk,) = Phonemizer().chunks("Dr. Smith paid $3.50 for coffee, didn't he?", voice="af_heart",
                                   options=NORMALIZE_NONE)  # misaki's own words (test_normalize.py: ours)
    spelled = {w.text: chunk.phonemes[w.phoneme_start:w.phoneme_end] for w in chunk.words}
    assert list(spelled) == ["Dr.", "Smith", "paid", "3.50", "for", "coffee", "didn't", "he"]
    assert spelled["Smith"] == "smˈɪθ" and spelled["coffee"] == "kˈɔfi"
    assert "θɹˈi" in spelled["3.50"]  # a number is its spoken words' phonemes


def test_a_chunk_cut_into_sentence_jobs_keeps_each_words_phonemes() -> None:
    (chunk,) = Phonemizer().chunks("Hello there. How are you today?", voice="af_heart")
    jobs = chunk_jobs(chunk)
    assert [[w.text for w in job.words] for job in jobs] == [["Hello", "there"], ["How", "are", "you", "today"]]
    for job in jobs:
        whole = {w.text: chunk.phonemes[w.phoneme_start:w.phoneme_end] for w in chunk.words}
        assert all(job.phonemes[w.phoneme_start:w.phoneme_end] == whole[w.text] for w in job.words)


def test_the_aligner_finds_words_in_order_and_marks_rewritten_ones() -> None:
    aligner = TextAligner("the cat and the hat")
    first = aligner.place([ChunkWord(text="the", phoneme_start=0, phoneme_end=1)])
    rest = aligner.place([ChunkWord(text=t, phoneme_start=0, phoneme_end=1) for t in ("cat", "the", "three", "hat")])
    assert [(p.char_start, p.char_end) for p in (*first, *rest)] == [(0, 3), (4, 7), (12, 15), (15, 15), (16, 19)]


def test_durations_skip_symbols_the_model_does_not_know() -> None:
    vocab = {"a": 1, "b": 2, "c": 3}
    starts = phoneme_frame_starts("ab?c", np.array([2, 1, 2, 3, 4]), vocab)
    assert starts is not None and starts.tolist() == [2, 3, 5, 5, 8]
    assert phoneme_frame_starts("ab?c", np.array([2, 1, 2, 3, 3, 4]), vocab) is None  # counts disagree: no times


def test_real_weights_give_word_times_inside_the_audio() -> None:
    ra.require_weights()
    words, audio = speak_words(ra.model(), ra.engine(), LONG, "jf_alpha")
    expected = re.findall(r"[A-Za-z']+", LONG)
    assert [w.text for w in words] == expected
    assert_well_formed(words, LONG, len(audio) / 24)
    assert words[-1].end_ms > 0.8 * len(audio) / 24  # the words span the speech, not a corner of it


def frame_rms_db(audio: np.ndarray, at_ms: np.ndarray, half_ms: float = 10.0) -> np.ndarray:
    """Energy (dB) of the 20 ms around each time."""
    out = []
    for ms in at_ms:
        lo, hi = int((ms - half_ms) * 24), int((ms + half_ms) * 24)
        window = audio[max(lo, 0):max(hi, lo + 1)]
        out.append(10 * np.log10(np.mean(np.square(window, dtype=np.float64)) + 1e-12))
    return np.array(out)


def dips(audio: np.ndarray, at_ms: np.ndarray, span_ms: float = 100.0) -> np.ndarray:
    """Whether the audio at each time is quieter than ``span_ms`` before and after it: a local low."""
    here = frame_rms_db(audio, at_ms)
    dipped: np.ndarray = here < np.minimum(frame_rms_db(audio, at_ms - span_ms), frame_rms_db(audio, at_ms + span_ms))
    return dipped


LOW_ENERGY_TEXTS = (
    "Apple, banana, cherry, mango, orange, lemon, peach, grape.",
    "I think we should go home now because it is getting very late and cold outside.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
)


def test_real_word_boundaries_fall_on_low_energy_more_often_than_random_cuts() -> None:
    """Kokoro runs words together, so a boundary is rarely silence; but it is a local low of the
    energy (a consonant or a pause between two vowels' peaks) much more often than a random
    point of the same speech is. Measured here: 0.63 of 38 boundaries, 0.32 of random points, and
    0.27 of word centres (what times half a word off would give)."""
    ra.require_weights()
    rng = np.random.default_rng(0)
    at_boundaries: list[bool] = []
    at_random: list[bool] = []
    for text in LOW_ENERGY_TEXTS:
        words, audio = speak_words(ra.model(), ra.engine(), text, "jf_alpha")
        boundaries = np.array([(a.end_ms + b.start_ms) / 2 for a, b in zip(words, words[1:])])
        at_boundaries.extend(dips(audio, boundaries))
        at_random.extend(dips(audio, rng.uniform(words[0].start_ms, words[-1].end_ms, 500)))
    boundary_rate, random_rate = float(np.mean(at_boundaries)), float(np.mean(at_random))
    assert boundary_rate > random_rate + 0.15, f"boundaries {boundary_rate:.2f}, random cuts {random_rate:.2f}"
