"""``serve``'s start-up choices: the onnx engine over SageMaker's torch model cache."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kokoro_server.__main__ import onnx_over_torch_dir
from kokoro_server.config import Settings
from kokoro_server.model_dir import open_model_dir

pytestmark = pytest.mark.kokoro


def test_onnx_engine_over_a_torch_directory_serves_the_packaged_export_with_the_cache_voices(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KOKORO_ONNX_DIR", str(tmp_path / "onnx"))
    settings = Settings.from_env({"KOKORO_MODEL_DIR": str(tiny_model), "KOKORO_ENGINE": "onnx"})
    served = onnx_over_torch_dir(settings)
    assert served == tmp_path / "onnx"
    model = open_model_dir(served, engine="onnx")
    assert model.weights.suffix == ".onnx"
    # the cache's (here: tiny) voices join the packaged Japanese ones
    assert {"af_heart", "am_michael", "jf_alpha"} <= set(model.voices)


@pytest.mark.parametrize("engine", [None, "torch"])
def test_other_engines_serve_the_directory_as_it_is(tiny_model: Path, engine: str | None) -> None:
    env = {"KOKORO_MODEL_DIR": str(tiny_model), **({"KOKORO_ENGINE": engine} if engine else {})}
    assert onnx_over_torch_dir(Settings.from_env(env)) == tiny_model


MEASURE = {"KOKORO_DECODER_PACE": "measure"}


@pytest.mark.real_model
@pytest.mark.parametrize(("env", "pace"), [({}, None), (MEASURE, None), ({"KOKORO_DECODER_PACE": "0.2"}, 0.2),
                                           ({"KOKORO_DECODER_PACE": "0"}, 0.0),
                                           ({**MEASURE, "KOKORO_WARMUP": "0"}, 0.0)])  # nothing measured
def test_windows_keep_up_with_the_decoder_pace_measured_at_warm_up_or_set(
    env: dict[str, str], pace: float | None
) -> None:
    """On the real int8 weights: ``measure`` takes this machine's pace before serving."""
    import real_audio as ra

    from kokoro_server.__main__ import load
    from kokoro_server.scheduler import Scheduler

    ra.require_weights()
    synth = load(Settings.from_env({"KOKORO_MODEL_DIR": str(ra.packaged_dir()), **env}))(Scheduler())
    try:
        if pace is None:  # measured, and that figure sizes the windows (the figure itself depends
            # on the host and its load: no bound on it here, benchmarks report it)
            assert math.isfinite(synth.cost.pace) and synth.cost.pace > 0 and synth.pace.remeasure
            assert synth.pace.fitted  # to the warm-up's windows of two sizes
        else:
            assert synth.cost.pace == pace
    finally:
        synth.close()
