"""The agent in Kokoro's other languages: the page shows each voice with its language, and a
Japanese voice asked in Japanese answers in Japanese, read by the TTS server's Japanese G2P.

A real Kokoro server (tiny model: its audio is noise) whose model directory has two voices added
under Japanese and Spanish names; which G2P read the text shows in the word events, whose units
are Japanese phrases only when misaki's Japanese reader ran (tests/kokoro/test_languages_real.py
speaks each language through the real weights).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from agent_harness import RunningAgent, serve_agent, stats
from agent_wire import ws_next_event, ws_open, ws_turn
from kokoro_server_fixture import START_TIMEOUT_S, KokoroServer, kokoro_python

from voice_agent.models import ANSWERS_BY_LANGUAGE, ScriptedModel, language_of, tokenize
from voicestream.chunker import iter_sentences
from voicestream.launch import KokoroProcess
from voicestream.protocol import LANGUAGES

JAPANESE_PROMPT = "こんにちは。元気ですか？"


@pytest.fixture(scope="module")
def multilingual_tts(kokoro_server: KokoroServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("multilingual") / "model"
    shutil.copytree(kokoro_server.model_dir, root)
    for name in ("jf_tiny", "ef_tiny"):
        shutil.copyfile(root / "voices" / "af_heart.pt", root / "voices" / f"{name}.pt")
    process = KokoroProcess(model_dir=root, python=kokoro_python(), log_path=root.parent / "server.log",
                            env={"KOKORO_DEVICE": "cpu", "KOKORO_WARMUP": "0"})
    process.start(timeout_s=START_TIMEOUT_S)
    yield process.url
    process.stop(timeout_s=10)


@pytest.fixture(scope="module")
def multilingual_agent(multilingual_tts: str) -> Iterator[RunningAgent]:
    with serve_agent(tts_url=multilingual_tts, page=True) as running:
        yield running


@pytest.mark.parametrize(("prompt", "lang"), [
    ("What is streaming speech?", "a"), ("¿Qué es esto?", "e"), ("Bonjour, ça va ?", "f"),
    ("Ciao, come stai?", "i"), ("Olá, tudo bem?", "p"), (JAPANESE_PROMPT, "j"), ("你好", "z"), ("नमस्ते", "h"),
])
def test_the_offline_model_answers_in_the_language_it_is_asked_in(prompt: str, lang: str) -> None:
    assert language_of(prompt) == lang
    answer = ScriptedModel(answers=("An English answer.",)).answer_for(prompt)
    assert answer == ANSWERS_BY_LANGUAGE.get(lang, "An English answer.")


def test_japanese_streams_in_tokens_of_a_few_characters() -> None:
    tokens = tokenize(ANSWERS_BY_LANGUAGE["j"])
    assert "".join(tokens) == ANSWERS_BY_LANGUAGE["j"] and max(map(len, tokens)) <= 3


def test_ready_lists_the_voices_and_their_languages(multilingual_agent: RunningAgent) -> None:
    ws, ready = ws_open(multilingual_agent.ws_url)
    ws.close()
    assert {"af_heart", "jf_tiny", "ef_tiny"} <= set(ready["voices"]) and ready["languages"] == LANGUAGES


def test_a_japanese_voice_asked_in_japanese_answers_and_reads_japanese(multilingual_agent: RunningAgent) -> None:
    ws, _ = ws_open(multilingual_agent.ws_url)
    try:
        log = ws_turn(ws, {"prompt": JAPANESE_PROMPT, "voice": "jf_tiny", "lang": "j"})
    finally:
        ws.close()
    answer = ANSWERS_BY_LANGUAGE["j"]
    assert log.of("start")[0]["lang"] == "j" and log.text == answer
    assert log.sentences == list(iter_sentences(answer)) == ["オフラインのモデルが日本語でお答えします。",
                                                           "文ができるたびに、すぐに読み上げます。"]
    words = [w["text"] for event in log.of("words") for w in event["words"]]
    assert words == ["オフラインのモデルが日本語でお答えします", "文ができるたびに", "すぐに読み上げます"]
    assert log.audio and log.end["tts_ok"] is True


def test_a_code_kokoro_has_not_is_refused_naming_the_field(multilingual_agent: RunningAgent) -> None:
    ws, _ = ws_open(multilingual_agent.ws_url)
    try:
        ws.send(json.dumps({"prompt": "Hello.", "lang": "klingon"}))
        error = ws_next_event(ws)
    finally:
        ws.close()
    assert error["type"] == "error" and error["field"] == "lang" and "a (American English)" in error["message"]


def test_the_page_shows_each_voice_with_its_language_and_speaks_japanese(
    multilingual_agent: RunningAgent, browser: Any,
) -> None:
    page = browser.new_page()
    try:
        page.goto(f"{multilingual_agent.url}/")
        page.wait_for_function("() => window.__voiceStats && window.__voiceStats.state === 'idle'", timeout=15_000)
        groups = page.eval_on_selector_all("#voice optgroup", "els => els.map(e => e.label)")
        assert {"American English", "Japanese", "Spanish"} <= set(groups)
        labels = page.eval_on_selector_all("#voice option", "els => els.map(e => e.textContent)")
        assert "jf_tiny · Japanese" in labels and "ef_tiny · Spanish" in labels
        page.select_option("#voice", "jf_tiny")
        page.fill("#prompt", JAPANESE_PROMPT)
        page.click("#send")
        page.wait_for_function("() => window.__voiceStats.events.includes('end')", timeout=60_000)
        final = stats(page)
        assert final["errors"] == [] and final["scheduled"], final
        assert "日本語でお答えします" in page.inner_text("#answer")
    finally:
        page.close()
