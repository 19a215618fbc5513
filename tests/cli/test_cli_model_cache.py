"""The model-cache sync against a real moto S3: layout, manifest, idempotence, verification."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from clitest_support import REVISION, make_model_dir, session

from cli.model_cache import SyncResult, read_manifest, sync_model_cache
from cli.model_sources import ByteCallback, LocalDirSource, SourceFile, SyncError

if TYPE_CHECKING:
    from conftest import AwsEnv  # the fixtures' types

BUCKET = "kokoro-cache-unit"
PREFIX = f"models/kokoro-82m/{REVISION}/"
MODEL_FILES = ["config.json", "kokoro-v1_0.pth", "voices/af_heart.pt", "voices/x.pt"]


@pytest.fixture
def s3(aws: AwsEnv) -> Any:  # a boto3 client (untyped)
    client = session().client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


def _keys(s3: Any) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def _sync(s3: Any, model_dir: Path, **kwargs: Any) -> SyncResult:
    return sync_model_cache(
        s3=s3, bucket=BUCKET, prefix=PREFIX, source=LocalDirSource(model_dir), revision=REVISION, **kwargs
    )


def test_sync_uploads_model_files_and_writes_manifest(s3: Any, tmp_path: Path) -> None:
    model = make_model_dir(tmp_path / "model")
    result = _sync(s3, model)
    assert result.summary == "4 copied, 0 already present"
    assert _keys(s3) == {PREFIX + f for f in [*MODEL_FILES, "manifest.json"]}  # README.md skipped
    manifest = read_manifest(s3=s3, bucket=BUCKET, prefix=PREFIX)
    assert manifest is not None
    assert manifest["model"] == "hexgrad/Kokoro-82M" and manifest["revision"] == REVISION
    assert [f["path"] for f in manifest["files"]] == MODEL_FILES
    pth = next(f for f in manifest["files"] if f["path"] == "kokoro-v1_0.pth")
    assert pth["size"] == 20_000
    head = s3.head_object(Bucket=BUCKET, Key=PREFIX + "kokoro-v1_0.pth")
    assert head["Metadata"]["sha256"] == pth["sha256"]
    assert "synced_at" in manifest


def test_rerun_copies_nothing(s3: Any, tmp_path: Path) -> None:
    model = make_model_dir(tmp_path / "model")
    _sync(s3, model)
    first = s3.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read()
    again = _sync(s3, model)
    assert again.summary == "0 copied, 4 already present"
    assert not again.manifest_written
    assert s3.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read() == first


def test_changed_file_is_the_only_one_copied(s3: Any, tmp_path: Path) -> None:
    model = make_model_dir(tmp_path / "model")
    _sync(s3, model)
    (model / "voices" / "x.pt").write_bytes(os.urandom(1_500))  # same size, new content
    result = _sync(s3, model)
    assert result.copied == ["voices/x.pt"]
    assert len(result.present) == 3 and result.manifest_written
    manifest = read_manifest(s3=s3, bucket=BUCKET, prefix=PREFIX)
    entry = next(f for f in manifest["files"] if f["path"] == "voices/x.pt")  # type: ignore[index]
    assert s3.head_object(Bucket=BUCKET, Key=PREFIX + "voices/x.pt")["Metadata"]["sha256"] == entry["sha256"]


class _WrongHashSource:
    """A source whose listing promises a different sha256 than the bytes it delivers."""

    def __init__(self, inner: LocalDirSource, bad: str) -> None:
        self.inner, self.bad = inner, bad

    @property
    def label(self) -> str:
        return "tampered-source"

    def list_files(self) -> list[SourceFile]:
        return [replace(f, sha256="0" * 64) if f.path == self.bad else f for f in self.inner.list_files()]

    @contextmanager
    def fetch(self, file: SourceFile, *, on_bytes: ByteCallback | None = None) -> Iterator[Path]:
        with self.inner.fetch(file, on_bytes=on_bytes) as path:
            yield path


def test_sha_mismatch_from_source_is_refused(s3: Any, tmp_path: Path) -> None:
    source = _WrongHashSource(LocalDirSource(make_model_dir(tmp_path / "model")), "voices/af_heart.pt")
    with pytest.raises(SyncError, match=r"sha256 mismatch for voices/af_heart.pt from tampered-source"):
        sync_model_cache(s3=s3, bucket=BUCKET, prefix=PREFIX, source=source, revision=REVISION)
    assert PREFIX + "voices/af_heart.pt" not in _keys(s3)
    assert PREFIX + "manifest.json" not in _keys(s3)  # no manifest for an incomplete cache


def test_big_file_goes_multipart_and_stays_idempotent(s3: Any, tmp_path: Path) -> None:
    model = make_model_dir(tmp_path / "model", weights=os.urandom(6 * 1024 * 1024))
    result = _sync(s3, model, multipart_threshold=5 * 1024 * 1024)
    assert "kokoro-v1_0.pth" in result.copied
    head = s3.head_object(Bucket=BUCKET, Key=PREFIX + "kokoro-v1_0.pth")
    assert head["ETag"].strip('"').endswith("-2")  # two parts
    assert head["Metadata"]["sha256"]
    assert _sync(s3, model, multipart_threshold=5 * 1024 * 1024).copied == []


def test_objects_without_metadata_count_as_present_via_manifest(s3: Any, tmp_path: Path) -> None:
    model = make_model_dir(tmp_path / "model")
    _sync(s3, model)
    # Re-put one object without the sha256 metadata (as `aws s3 cp` would): the manifest vouches.
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "config.json", Body=(model / "config.json").read_bytes())
    assert _sync(s3, model).copied == []


def test_not_a_model_dir_is_refused(s3: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SyncError, match="does not look like a Kokoro model directory"):
        _sync(s3, tmp_path / "empty")
    with pytest.raises(SyncError, match="does not exist"):
        _sync(s3, tmp_path / "missing")


def test_manifest_json_matches_contract(s3: Any, tmp_path: Path) -> None:
    _sync(s3, make_model_dir(tmp_path / "model"))
    raw = json.loads(s3.get_object(Bucket=BUCKET, Key=PREFIX + "manifest.json")["Body"].read())
    assert set(raw) == {"model", "revision", "files", "synced_at"}
    assert all(set(f) == {"path", "size", "sha256"} for f in raw["files"])
