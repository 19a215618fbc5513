"""Settings come from the environment; a bad value names its variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from kokoro_server.config import ConfigError, Settings

pytestmark = pytest.mark.kokoro


def test_defaults_and_overrides(tmp_path: Path) -> None:
    settings = Settings.from_env({"KOKORO_MODEL_DIR": str(tmp_path), "PORT": "9000", "KOKORO_ENGINE": "onnx"})
    assert (settings.model_dir, settings.port, settings.engine, settings.host) == (tmp_path, 9000, "onnx", "127.0.0.1")
    # bench variants (bench/variants.py)
    assert not hasattr(settings, "decoding") and not hasattr(settings, "scheduler")
    assert settings.max_request_age_s == 56.0  # the AWS sample's bound, just under SageMaker's 60 s
    aged = Settings.from_env({"KOKORO_MODEL_DIR": str(tmp_path), "KOKORO_MAX_REQUEST_AGE_S": "10.5"})
    assert aged.max_request_age_s == 10.5
    assert settings.decoder_pace is None  # measured at warm-up
    paced = {"KOKORO_MODEL_DIR": str(tmp_path), "KOKORO_DECODER_PACE": "0.2"}
    assert Settings.from_env(paced).decoder_pace == 0.2
    assert Settings.from_env({**paced, "KOKORO_DECODER_PACE": "measure"}).decoder_pace is None
    assert Settings.from_env({**paced, "KOKORO_DECODER_PACE": "0"}).decoder_pace == 0.0  # a free decoder
    assert settings.first_audio_s == 0.5
    graced = {"KOKORO_MODEL_DIR": str(tmp_path), "KOKORO_FIRST_AUDIO_S": "0"}
    assert Settings.from_env(graced).first_audio_s == 0.0  # a first window due at once
    assert settings.memory_trim_after_s == 30.0
    trimmed = Settings.from_env({"KOKORO_MODEL_DIR": str(tmp_path), "KOKORO_MEMORY_TRIM_AFTER_S": "2.5"})
    assert trimmed.memory_trim_after_s == 2.5
    assert settings.languages is None  # every language whose G2P is installed
    narrowed = Settings.from_env({"KOKORO_MODEL_DIR": str(tmp_path), "KOKORO_LANGUAGES": " j, a,j "})
    assert narrowed.languages == ("j", "a")


@pytest.mark.parametrize(("env", "variable"), [
    ({}, "KOKORO_MODEL_DIR"),
    ({"KOKORO_MODEL_DIR": "/x", "PORT": "eighty"}, "PORT"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_MAX_SESSIONS": "0"}, "KOKORO_MAX_SESSIONS"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_ENGINE": "tensorflow"}, "KOKORO_ENGINE"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_MAX_REQUEST_AGE_S": "-1"}, "KOKORO_MAX_REQUEST_AGE_S"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_DECODER_PACE": "-0.1"}, "KOKORO_DECODER_PACE"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_DECODER_PACE": "fast"}, "KOKORO_DECODER_PACE"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_FIRST_AUDIO_S": "-0.5"}, "KOKORO_FIRST_AUDIO_S"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_FIRST_AUDIO_S": "11"}, "KOKORO_FIRST_AUDIO_S"),  # past the slack cap
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_FIRST_AUDIO_S": "soon"}, "KOKORO_FIRST_AUDIO_S"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_MEMORY_TRIM_AFTER_S": "0"}, "KOKORO_MEMORY_TRIM_AFTER_S"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_MEMORY_TRIM_AFTER_S": "later"}, "KOKORO_MEMORY_TRIM_AFTER_S"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_LANGUAGES": "a,en"}, "KOKORO_LANGUAGES"),
    ({"KOKORO_MODEL_DIR": "/x", "KOKORO_LANGUAGES": ","}, "KOKORO_LANGUAGES"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as error:
        Settings.from_env(env)
    assert str(error.value).startswith(f"{variable}:")
