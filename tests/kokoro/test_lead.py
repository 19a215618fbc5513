"""The silence before a chunk's speech (kokoro_server/lead.py): what of it is sent, that no speech
goes with it, and that the job sizer keeps the listener fed without it."""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_server.engines.windows import FRAME_S, Seams
from kokoro_server.lead import KEPT_FRAMES, heard_part, kept_frames, silent_lead
from kokoro_server.sizing import Cost, Sizer, sizes_alone
from kokoro_server.tail import heard_end

pytestmark = pytest.mark.kokoro

SPF = 600  # samples a frame


def test_the_lead_is_the_start_pad_but_its_last_frames() -> None:
    assert silent_lead(np.array([18.0, 2, 3, 13, 1])) == 18 - KEPT_FRAMES
    assert silent_lead(np.array([KEPT_FRAMES, 2, 1])) == 0  # a short pad (the tiny model's) is all kept
    assert silent_lead(np.array([3.0, 2, 1])) == 0
    assert silent_lead(None) == 0  # an engine that gives no durations: nothing is cut
    assert silent_lead(np.array([])) == 0
    assert silent_lead(np.array([np.nan, 2, 1])) == 0


def test_the_lead_is_sent_while_another_listener_has_no_audio() -> None:
    durations = np.array([18.0, 2, 3, 13, 1])
    assert silent_lead(durations, others_s=0.0) == 0  # one waits for its first audio, or ran dry
    assert silent_lead(durations, others_s=1.5) == 18 - KEPT_FRAMES  # the others have audio to hear
    assert silent_lead(durations, others_s=None) == 18 - KEPT_FRAMES  # no other listener has work


def test_slower_speech_keeps_more_of_its_pad() -> None:
    assert kept_frames(1.0) == KEPT_FRAMES
    assert [kept_frames(s) for s in (0.5, 0.8, 1.25, 2.0, 4.0)] == [32, 13, 7, 4, 2]
    assert silent_lead(np.array([36.0, 2, 1]), 0.5) == 4
    assert silent_lead(np.array([9.0, 2, 1]), 2.0) == 5


def test_the_heard_part_drops_the_lead_but_never_the_whole_window() -> None:
    window = np.arange(30 * SPF, dtype=np.float32)
    np.testing.assert_array_equal(heard_part(window, 10, SPF), window[10 * SPF:])
    np.testing.assert_array_equal(heard_part(window, 0, SPF), window)
    np.testing.assert_array_equal(heard_part(window, 45, SPF), window[-SPF:])  # a window shorter than its lead


def _least_queue(sizes: list[int], cost: Cost, lead: int) -> float:
    """The least audio a listener alone has queued when one of the later windows' decoding ends,
    its first window's ``lead`` frames not sent (negative: it waited in the middle of the speech)."""
    seams, frames = Seams(), sum(sizes)
    queued, done, least = 0.0, 0, np.inf
    for size in sizes:
        decoded_s = cost.decode_s(seams.rendered(size, started=bool(done), last=done + size >= frames))
        if done:
            least = min(least, queued - decoded_s)
        queued = max(0.0, queued - decoded_s) + (size - (0 if done else min(lead, size))) * FRAME_S
        done += size
    return float(least)


@pytest.mark.parametrize("pace", [0.15, 0.3, 0.37])
@pytest.mark.parametrize("frames", [200, 418])
def test_windows_sized_knowing_the_lead_keep_the_listener_fed(pace: float, frames: int) -> None:
    """The first window's audio no longer carries 0.3 s of silence for the next window to decode
    under: sized without knowing that, the listener waits mid-sentence."""
    cost, lead = Cost(pace=pace), 12
    knowing = sizes_alone(frames, Sizer(), cost, lead=lead)
    unaware = sizes_alone(frames, Sizer(), cost)
    assert len(knowing) >= 2  # cut: there is a later window to keep up with
    assert _least_queue(knowing, cost, lead) >= 0, knowing
    assert _least_queue(unaware, cost, lead) < 0, unaware


TEXTS = ("Sure.", "Okay!", "Hmm, let me check.", "No problem at all.", "What time is it?",
         "Absolutely, I can help with that.", "Three hundred dollars.", "Please hold.", "Strong winds tonight.")
OTHER_SPEEDS_TEXTS = TEXTS[:4]
VOICES = ("af_heart", "am_michael", "bf_emma", "bm_george")
SILENT = 10 ** (-60 / 20)  # -60 dBFS


@pytest.mark.real_model
@pytest.mark.parametrize("speed", [0.5, 0.8, 1.0, 1.25, 2.0])
def test_no_speech_is_in_the_lead_on_the_real_weights(speed: float) -> None:
    """Every sample left out is below -60 dBFS, in four English voices at five speeds, and there
    was silence to leave out."""
    import real_audio as ra

    from kokoro_server.model_dir import style_for

    cut = 0
    for voice in VOICES:
        pack = ra.model().voices[voice]
        for text in TEXTS if speed == 1.0 else OTHER_SPEEDS_TEXTS:
            for phonemes in ra.phonemizer().phonemize(text, voice=voice, lang=ra.ENGLISH):
                spoken = ra.engine().synthesize(phonemes, style_for(pack, phonemes), speed)
                lead = silent_lead(spoken.durations, speed)
                left_out = spoken.audio[:lead * SPF]
                assert float(np.abs(left_out).max(initial=0.0)) < SILENT, (voice, text, speed, lead)
                cut += lead
    assert cut >= 2 * len(VOICES), cut  # at least 2 frames a sentence on average


@pytest.mark.real_model
def test_a_served_chunk_starts_near_its_speech_and_its_words_move_with_it() -> None:
    """Through the synthesizer: the first window's audio starts KEPT_FRAMES before the pad's end
    (so its speech starts within them), and word times count from what is sent."""
    import real_audio as ra

    from kokoro_server.g2p import sentence_jobs

    text, voice = "Meet me at nine fifteen tomorrow.", "af_heart"
    chunks = ra.served(text, voice)
    audio = np.concatenate([c.synthesis.audio for c in chunks])
    (phonemes,) = [job for chunk in ra.phonemizer().phonemize(text, voice=voice, lang=ra.ENGLISH)
                   for job in sentence_jobs(chunk)]
    durations = chunks[0].synthesis.durations
    assert durations is not None and silent_lead(durations) > 0
    onset = int(np.nonzero(np.abs(audio) > SILENT)[0][0])
    assert SPF <= onset <= KEPT_FRAMES * SPF, onset  # speech within the kept frames, not at the first sample
    one_shot = ra.engine().synthesize(phonemes, ra.model().voices[voice][len(phonemes) - 1], 1.0).audio
    words = [w for c in chunks for w in c.words]
    sent = heard_end(one_shot[silent_lead(durations) * SPF:], SPF, keep=words[-1].end_ms * 24)  # tail.py
    assert audio.size == pytest.approx(sent.size, abs=SPF)
    assert [w.text for w in words][:2] == ["Meet", "me"]
    assert words[0].start_ms == pytest.approx(KEPT_FRAMES * FRAME_S * 1000, abs=1)  # where the pad ends
    ra.assert_speech(audio, what=text)
    assert ra.wer(ra.recognise(audio), text) <= 0.2
