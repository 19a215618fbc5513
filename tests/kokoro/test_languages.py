"""Kokoro's nine languages: each voice reads its own language with kokoro's own G2P, ``lang`` /
``lang_code`` override it, and a language that cannot be read is refused, never read as English.

G2P in process (the real libraries, offline); the routes on a real server with the tiny model (its
audio is noise, but which language reads the text, the refusals and the word offsets are the
server's own). test_languages_real.py speaks each language through the real weights.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kokoro_harness import Server, start_server
from wsclient import collect, connect, of_type, send, sse_events

from bench.languages import SENTENCES, kokoro_reading
from kokoro_server.g2p import Phonemizer
from kokoro_server.languages import READERS, resolve_language, served_languages
from voicestream.protocol import LANGUAGES, ProtocolError
from voicestream.protocol.normalization import Normalization

pytestmark = pytest.mark.kokoro

SERVED_HERE = "a (American English), b (British English)"


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer()


def test_every_language_is_served_with_the_container_requirements() -> None:
    assert served_languages() == tuple(LANGUAGES) == tuple(READERS)


@pytest.mark.parametrize("lang", list(SENTENCES))
def test_each_voice_reads_its_language_as_kokoro_does_not_as_english(phonemizer: Phonemizer, lang: str) -> None:
    voice, text = SENTENCES[lang]
    ours = " ".join(phonemizer.phonemize(text, voice=voice))
    assert ours == kokoro_reading(text, lang)
    if lang not in ("a", "b"):
        assert ours != kokoro_reading(text, "a")


def test_lang_overrides_the_voice(phonemizer: Phonemizer) -> None:
    english, japanese = SENTENCES["a"][1], SENTENCES["j"][1]
    assert " ".join(phonemizer.phonemize(english, voice="jf_alpha", lang="a")) == kokoro_reading(english, "a")
    assert " ".join(phonemizer.phonemize(japanese, voice="af_heart", lang="j")) == kokoro_reading(japanese, "j")


@pytest.mark.parametrize(("voice", "text", "words"), [
    ("jf_alpha", "こんにちは、元気ですか？", ["こんにちは", "元気ですか"]),  # no spaces: phrases
    ("zf_xiaobei", "你好，我们去公园吧。", ["你好", "我们去公园吧"]),
    ("ef_dora", "Hola, ¿cómo estás?", ["Hola", "cómo", "estás"]),  # spaces: words
    ("ff_siwis", "Bonjour ! Ça va ?", ["Bonjour", "Ça", "va"]),
    ("hf_alpha", "आप कैसे हैं?", ["आप", "कैसे", "हैं"]),
])
def test_words_of_each_language_are_pieces_of_the_text_with_their_phonemes(
    phonemizer: Phonemizer, voice: str, text: str, words: list[str],
) -> None:
    chunks = phonemizer.chunks(text, voice=voice)
    found = [w for chunk in chunks for w in chunk.words]
    assert [w.text for w in found] == words
    for chunk in chunks:
        for word in chunk.words:
            assert 0 <= word.phoneme_start < word.phoneme_end <= len(chunk.phonemes)


def test_a_number_read_as_several_words_keeps_the_words_around_it(phonemizer: Phonemizer) -> None:
    (chunk,) = phonemizer.chunks("Tengo 1.500 euros, gracias.", voice="ef_dora")
    assert [w.text for w in chunk.words] == ["Tengo 1500 euros", "gracias"]
    assert chunk.words[0].source == "Tengo 1.500 euros"  # the words point at what the client wrote


def test_spanish_numbers_are_read_in_spanish_and_never_rewritten_into_english(phonemizer: Phonemizer) -> None:
    said = " ".join(phonemizer.phonemize("Tengo 25 años, 1.500 euros y 3,5 kilos; cuesta $20 el 3 de mayo.",
                                         voice="ef_dora"))
    for spanish in ("βˌAntiθˈinko", "mˈil kinjˈɛntos", "tɾˈes kˈoma θˈinko", "ˈolaɾ βˈAnte", "mˈaʝo"):
        assert spanish in said, (spanish, said)
    english = " ".join(phonemizer.phonemize("25 1,500 $20 May", voice="af_heart"))
    for word in ("twˈɛnti", "θˈWzᵊnd", "dˈɑləɹz", "mˈA"):  # what English normalization and G2P say
        assert word in english and word not in said


def test_only_markdown_and_number_rules_apply_outside_english(phonemizer: Phonemizer) -> None:
    assert phonemizer.phonemize("**Hola**, amigo.", voice="ef_dora") == ["ˈola, amˈiɣo."]
    kept = phonemizer.phonemize("Son 1.500.", voice="ef_dora", lang="e")
    as_written = Phonemizer().chunks("Son 1.500.", voice="ef_dora", options=_numbers_off())
    assert "mˈil" in kept[0] and "ˈuno" in as_written[0].phonemes  # {"numbers": false}: espeak's own reading


def _numbers_off() -> Normalization:
    from voicestream.protocol.normalization import check_normalization

    return check_normalization({"numbers": False})


@pytest.mark.parametrize("voice", ["jf_alpha", "zf_xiaobei"])
def test_a_long_sentence_without_spaces_is_cut_to_fit_the_model_not_truncated(
    phonemizer: Phonemizer, voice: str
) -> None:
    lang = voice[0]
    sentence = SENTENCES[lang][1].rstrip("。")
    text = "、".join([sentence] * 12) if lang == "j" else "，".join([sentence] * 12)
    chunks = phonemizer.chunks(text + "。", voice=voice)
    assert len(chunks) > 1 and all(0 < len(c.phonemes) <= 510 for c in chunks)
    whole = kokoro_reading(sentence, lang).rstrip(".")
    assert sum(c.phonemes.count(whole) for c in chunks) == 12  # every repeat was read


def test_a_language_not_served_is_refused_naming_the_field_and_listing_the_served() -> None:
    with pytest.raises(ProtocolError) as by_field:
        resolve_language("af_heart", "j", served=("a", "b"))
    assert by_field.value.code == "unsupported_language" and by_field.value.field == "lang"
    assert by_field.value.message.startswith("lang: j (Japanese) is not served here")
    assert by_field.value.message.endswith(f"served: {SERVED_HERE}")
    with pytest.raises(ProtocolError) as by_voice:
        resolve_language("ef_dora", None, served=("a", "b"))
    assert by_voice.value.field == "voice" and "e (Spanish)" in by_voice.value.message


def test_the_voices_of_a_language_without_g2p_are_listed_as_not_served() -> None:
    from kokoro_tools.sdist_voices import find_sdist, read_sdist_voices

    sdist = find_sdist()
    assert sdist is not None, "make install fetches kokoro's sdist"
    read = read_sdist_voices(sdist, languages=("a", "b"))
    assert read.voices and all(name[0] in "ab" for name in read.voices)
    assert {name[0] for name in read.not_served} == set("efhijpz")


# ---- the routes --------------------------------------------------------------------------------

def _post(server: Server, body: dict[str, Any], path: str = "/invocations") -> httpx.Response:
    return httpx.post(f"{server.http}{path}", json=body, timeout=120)


def test_every_route_reads_the_language_asked_for(server: Server) -> None:
    japanese = SENTENCES["j"][1]
    assert _post(server, {"text": japanese, "voice": "af_heart", "lang": "j"}).status_code == 200
    assert _post(server, {"text": japanese, "lang": "j", "request_id": "r1", "stream": False}).status_code == 200
    spoken = _post(server, {"model": "kokoro", "input": japanese, "voice": "af_heart", "lang_code": "j",
                            "response_format": "pcm"}, "/v1/audio/speech")
    assert spoken.status_code == 200 and spoken.content
    voices = httpx.get(f"{server.http}/v1/audio/voices", timeout=30).json()
    assert voices["languages"] == LANGUAGES


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/invocations", {"text": "hola", "lang": "es"}, "lang"),
    ("/invocations", {"text": "hola", "lang": 5, "request_id": "r2"}, "lang"),
    ("/v1/audio/speech", {"model": "kokoro", "input": "hola", "voice": "af_heart", "lang_code": "x"}, "lang_code"),
])
def test_a_code_that_is_not_kokoros_is_refused_naming_the_field(
    server: Server, path: str, body: dict[str, Any], field: str
) -> None:
    response = _post(server, body, path)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.get("field", error.get("param")) == field
    assert "use one of a (American English)" in error["message"] and "z (Mandarin Chinese)" in error["message"]


def test_japanese_word_events_point_into_the_text_sent(server: Server) -> None:
    text = "こんにちは、元気ですか？私は元気です。"
    response = _post(server, {"text": text, "voice": "af_heart", "lang": "j", "transport": "sse", "timestamps": True})
    words = [w for event, data in sse_events(response.text) if event == "words" for w in data["words"]]
    assert [w["text"] for w in words] == ["こんにちは", "元気ですか", "私は元気です"]
    for word in words:
        assert text[word["char_start"]:word["char_end"]] == word["text"] and word["end_ms"] >= word["start_ms"]


def test_configure_sets_the_session_language_and_speak_overrides_it(server: Server) -> None:
    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with connect(server.ws) as ws:
            await send(ws, {"type": "configure", "lang": "z"})
            (configured,) = await collect(ws, of_type("configured"))
            await send(ws, {"type": "speak", "id": "u1", "text": SENTENCES["z"][1]})
            await send(ws, {"type": "speak", "id": "u2", "text": SENTENCES["e"][1], "lang": "e"})
            await send(ws, {"type": "speak", "id": "u3", "text": "hola", "lang": "sp"})
            events = await collect(ws, of_type("utterance_end", id="u2"))
            await send(ws, {"type": "close"})
            return configured, events
    configured, events = asyncio.run(scenario())
    assert configured["lang"] == "z" and configured["languages"] == LANGUAGES
    assert [e["id"] for e in events if e["type"] == "utterance_end"] == ["u1", "u2"]
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["field"] == "lang" and error["code"] == "invalid_field"


# ---- a server that serves English only (KOKORO_LANGUAGES) ------------------------------------------

@pytest.fixture(scope="module")
def english_only(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The tiny model with a Japanese voice added, served with KOKORO_LANGUAGES=a,b."""
    root = tmp_path_factory.mktemp("english-only") / "model"
    shutil.copytree(tiny_model, root)
    shutil.copyfile(root / "voices" / "af_heart.pt", root / "voices" / "jf_tiny.pt")
    running = start_server(root, root.parent / "server.log", env={"KOKORO_WARMUP": "0", "KOKORO_LANGUAGES": "a,b"})
    yield running
    running.stop()


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/invocations", {"text": "こんにちは", "lang": "j"}, "lang"),
    ("/invocations", {"text": "こんにちは", "voice": "jf_tiny"}, "voice"),
    ("/invocations", {"text": "こんにちは", "voice": "jf_tiny", "request_id": "r3"}, "voice"),
    ("/v1/audio/speech", {"model": "kokoro", "input": "hola", "voice": "af_heart", "lang_code": "e"}, "lang_code"),
])
def test_a_language_the_server_does_not_serve_is_refused_on_every_route(
    english_only: Server, path: str, body: dict[str, Any], field: str
) -> None:
    response = _post(english_only, body, path)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_language" and error.get("field", error.get("param")) == field
    assert error["message"].startswith(f"{field}: ") and error["message"].endswith(f"served: {SERVED_HERE}")


def test_a_session_is_refused_a_language_not_served_and_keeps_its_settings(english_only: Server) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with connect(english_only.ws) as ws:
            await send(ws, {"type": "configure", "lang": "j"})
            await send(ws, {"type": "configure", "voice": "jf_tiny"})
            await send(ws, {"type": "speak", "id": "u1", "text": "hola", "lang": "e"})
            await send(ws, {"type": "configure"})
            events = await collect(ws, of_type("configured"))
            await send(ws, {"type": "close"})
            return events
    events = asyncio.run(scenario())
    errors = [e for e in events if e["type"] == "error"]
    assert [(e["code"], e["field"]) for e in errors] == [("unsupported_language", "lang"),
                                                          ("unsupported_language", "voice"),
                                                          ("unsupported_language", "lang")]
    assert errors[2]["id"] == "u1"
    configured = events[-1]
    assert configured["voice"] == "af_heart" and configured.get("lang") is None  # the voice's: unchanged
    assert configured["languages"] == {"a": "American English", "b": "British English"}
