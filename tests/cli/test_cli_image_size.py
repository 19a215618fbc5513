"""`make image-size`: the estimate's arithmetic, offline (the real run needs PyPI; its output is
committed in infra/results/image-size.json)."""

from __future__ import annotations

import json
from pathlib import Path

from cli import image_size


def _item(tmp: Path, name: str, version: str, size: int) -> dict[str, object]:
    wheel = tmp / f"{name}-{version}-py3-none-any.whl"
    wheel.write_bytes(b"\0" * size)
    return {"metadata": {"name": name, "version": version}, "download_info": {"url": wheel.as_uri()}}


def test_the_estimate_sums_the_resolved_wheels_and_the_base(tmp_path: Path) -> None:
    items = [_item(tmp_path, "torch", "2.13.0+cu128", 3_000_000),
             _item(tmp_path, "nvidia-cudnn-cu12", "9.1", 2_000_000),
             _item(tmp_path, "numpy", "2.4.6", 500_000)]
    result = image_size.estimate(items, base_mb=100.0)
    assert result["wheels"] == 3 and result["wheels_mb"] == 5.5
    assert result["torch_and_cuda_wheels_mb"] == 5.0
    assert result["estimate_mb"] == 105.5
    assert "stand-in" not in result["note"]  # the cu128 build itself was resolved
    assert [row["name"] for row in result["largest"]] == ["torch", "nvidia-cudnn-cu12", "numpy"]


def test_the_committed_figure_says_how_it_was_made() -> None:
    recorded = json.loads((image_size.REPO / "infra/results/image-size.json").read_text())
    assert recorded["command"] == "make image-size" and recorded["base_image"] == image_size.BASE_IMAGE
    assert recorded["wheels_mb"] > 0 and recorded["note"]
    dockerfile = (image_size.REPO / "containers/kokoro/Dockerfile").read_text()
    assert f"FROM {image_size.BASE_IMAGE}" in dockerfile
