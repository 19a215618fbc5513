"""Voice blends: syntax, normalised weights, the blended pack, and refusals naming the field."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from kokoro_harness import Server

from kokoro_server.voices import BLEND_CACHE, VoiceBook, parse_blend
from voicestream.protocol import ProtocolError

pytestmark = pytest.mark.kokoro

SHAPE = (510, 1, 256)


@pytest.fixture
def book() -> VoiceBook:
    return VoiceBook(packs={
        "af_bella": np.full(SHAPE, 1.0, np.float32),
        "af_sky": np.full(SHAPE, 4.0, np.float32),
        "am_adam": np.full(SHAPE, -2.0, np.float32),
    })


def test_weights_are_normalised_and_repeats_merged() -> None:
    blend = parse_blend("af_bella(2)+af_sky(1)")
    assert [name for name, _ in blend] == ["af_bella", "af_sky"]
    assert [weight for _, weight in blend] == pytest.approx([2 / 3, 1 / 3])
    assert parse_blend(" af_bella + af_sky ( 3 ) ") == [("af_bella", 0.25), ("af_sky", 0.75)]
    assert parse_blend("af_bella(1)+af_sky(1)+af_bella(2)") == [("af_bella", 0.75), ("af_sky", 0.25)]
    assert parse_blend("af_bella(0.5)") == [("af_bella", 1.0)]


def test_a_blend_is_the_weighted_mean_of_its_packs(book: VoiceBook) -> None:
    name = book.resolve("af_bella(2)+af_sky(1)")
    assert name == "af_bella(0.6667)+af_sky(0.3333)"
    np.testing.assert_allclose(book.pack(name), 2.0, rtol=1e-6)  # (2 * 1 + 1 * 4) / 3
    assert book.resolve("af_sky(1)+af_bella(2)") != name  # order is kept: the first part sets the language
    assert book.resolve("af_bella(4)+af_sky(2)") == name  # same proportions, same blend
    assert book.resolve("am_adam(1)") == "am_adam" and book.pack("am_adam")[0, 0, 0] == -2.0


def test_evicted_blends_are_made_again_on_use(book: VoiceBook) -> None:
    first = book.resolve("af_bella(1)+af_sky(1)")
    for weight in range(2, BLEND_CACHE + 3):
        book.resolve(f"af_bella({weight})+am_adam(1)")
    np.testing.assert_allclose(book.pack(first), 2.5, rtol=1e-6)


@pytest.mark.parametrize(("spec", "code", "says"), [
    ("nobody", "unknown_voice", "unknown voice 'nobody'"),
    ("af_bella+nobody(2)", "unknown_voice", "'nobody' in blend"),
    ("af_bella(0)+af_sky", "invalid_field", "weight of 'af_bella' must be a positive number"),
    ("af_bella(-1)", "invalid_field", "positive number"),
    ("af_bella(nan)+af_sky", "invalid_field", "positive number"),
    ("af_bella(inf)+af_sky", "invalid_field", "positive number"),
    ("af_bella(two)", "invalid_field", "positive number"),
    ("af_bella++af_sky", "invalid_field", "cannot read"),
    ("af_bella(1", "invalid_field", "cannot read"),
    ("(1)af_bella", "invalid_field", "cannot read"),
    ("+".join(["af_bella"] * 9), "invalid_field", "at most 8"),
])
def test_bad_blends_are_refused_naming_the_field(book: VoiceBook, spec: str, code: str, says: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        book.resolve(spec, field="voice")
    assert caught.value.code == code and caught.value.field == "voice"
    assert caught.value.message.startswith("voice: ") and says in caught.value.message
    with pytest.raises(ProtocolError) as other:
        book.resolve(spec, field="speaker")
    assert other.value.field == "speaker" and other.value.message.startswith("speaker: ")


def test_blends_work_on_the_native_routes(server: Server) -> None:
    ok = httpx.post(f"{server.http}/invocations", json={"text": "Hi there.", "voice": "af_heart(3)+am_michael(1)"},
                    timeout=120)
    assert ok.status_code == 200 and len(ok.content) > 0
    bad = httpx.post(f"{server.http}/invocations", json={"text": "Hi.", "voice": "af_heart+ghost"}, timeout=30)
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "voice" and "'ghost'" in bad.json()["error"]["message"]


def test_the_example_blend_names_voices_the_book_has(book: VoiceBook) -> None:
    """A refusal teaches the syntax with a blend the client could send: of voices this book has."""
    assert book.blend_syntax.endswith("e.g. af_bella(2)+af_sky(1)")
    pack = np.zeros(SHAPE, np.float32)
    japanese = VoiceBook(packs={"jf_alpha": pack, "jm_kumo": pack, "jf_nezumi": pack})
    assert japanese.blend_syntax.endswith("e.g. jf_alpha(2)+jf_nezumi(1)")
    assert "e.g." not in VoiceBook(packs={"jf_alpha": pack}).blend_syntax
    with pytest.raises(ProtocolError) as caught:
        japanese.resolve("af_bella+jf_alpha")
    assert "unknown voice 'af_bella'" in caught.value.message
    assert "e.g. jf_alpha(2)+jf_nezumi(1)" in caught.value.message
