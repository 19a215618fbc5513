"""Sync the Kokoro model files into the model-cache bucket, manifest-driven and idempotent.

It runs inside the CLI, on the user's machine, so it uses the user's network and credentials
and shows progress; no CodeBuild project or custom-resource Lambda has to be secured for it.
An object counts as present when its size matches and its sha256 (object metadata, or the
manifest already in S3) matches; ``manifest.json`` is written last, so a reader that finds it
can trust that every file it lists is there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError
from rich.progress import Progress, TaskID

from cli.aws import is_client_error
from cli.model_sources import (
    MODEL_REPO_ID,
    ModelSource,
    SourceFile,
    SyncError,
    file_sha256,
)

MANIFEST_NAME = "manifest.json"
SHA_METADATA_KEY = "sha256"
DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
REQUIRED_FILES = ("config.json",)


@dataclass
class SyncResult:
    """What a sync did: which files it uploaded and which were already in the bucket."""

    bucket: str
    prefix: str
    copied: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    manifest_written: bool = False
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """The one-line report, e.g. '2 copied, 5 already present'."""
        return f"{len(self.copied)} copied, {len(self.present)} already present"


def normalize_prefix(prefix: str) -> str:
    """S3 prefixes in this layout have no leading and exactly one trailing slash."""
    cleaned = prefix.strip().strip("/")
    return f"{cleaned}/" if cleaned else ""


def read_manifest(*, s3: Any, bucket: str, prefix: str) -> dict[str, Any] | None:
    """The manifest at ``s3://bucket/prefix/manifest.json``, or None when there is none yet."""
    try:
        body = s3.get_object(Bucket=bucket, Key=normalize_prefix(prefix) + MANIFEST_NAME)["Body"].read()
    except ClientError as exc:
        if is_client_error(exc, "NoSuchKey", "404", "NotFound"):
            return None
        raise
    try:
        manifest = json.loads(body)
    except ValueError as exc:
        raise SyncError(f"s3://{bucket}/{prefix}{MANIFEST_NAME} is not valid JSON.") from exc
    return manifest if isinstance(manifest, dict) else None


def _existing_sizes(*, s3: Any, bucket: str, prefix: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            sizes[obj["Key"]] = int(obj["Size"])
    return sizes


def _manifest_shas(manifest: dict[str, Any] | None) -> dict[str, tuple[int, str]]:
    if not manifest:
        return {}
    return {
        str(f["path"]): (int(f["size"]), str(f["sha256"]))
        for f in manifest.get("files", [])
        if isinstance(f, dict) and {"path", "size", "sha256"} <= f.keys()
    }


class _RemoteState:
    """What the bucket already holds under the prefix, for the 'already present' decision."""

    def __init__(self, *, s3: Any, bucket: str, prefix: str, manifest: dict[str, Any] | None) -> None:
        self.s3, self.bucket, self.prefix = s3, bucket, prefix
        self.sizes = _existing_sizes(s3=s3, bucket=bucket, prefix=prefix)
        self.from_manifest = _manifest_shas(manifest)

    def has(self, path: str, *, size: int, sha256: str) -> bool:
        key = self.prefix + path
        if self.sizes.get(key) != size:
            return False
        meta: dict[str, str] = self.s3.head_object(Bucket=self.bucket, Key=key).get("Metadata", {})
        remote = meta.get(SHA_METADATA_KEY)
        if remote is None:
            remote = self.from_manifest.get(path, (size, ""))[1]
        return remote == sha256


def _check_source(files: list[SourceFile], label: str) -> None:
    names = {f.path for f in files}
    missing = [r for r in REQUIRED_FILES if r not in names]
    if missing or not any(f.path.endswith(".pth") for f in files):
        raise SyncError(
            f"{label} does not look like a Kokoro model directory "
            f"(needs config.json, kokoro-v1_0.pth and voices/*.pt; found {sorted(names) or 'nothing'}).",
        )


def _verified_sha(local: Path, file: SourceFile, label: str) -> str:
    """Hash what the source delivered and refuse it when it is not what the listing promised."""
    size = local.stat().st_size
    if size != file.size:
        raise SyncError(f"{file.path} from {label} has {size} bytes but was listed with {file.size}; refusing it.")
    actual = file_sha256(local)
    if file.sha256 and actual != file.sha256:
        raise SyncError(
            f"sha256 mismatch for {file.path} from {label}: got {actual[:16]}..., "
            f"expected {file.sha256[:16]}...; refusing to upload it.",
            hint="The source changed or is corrupt; re-download the model and retry.",
        )
    return actual


def sync_model_cache(
    *,
    s3: Any,
    bucket: str,
    prefix: str,
    source: ModelSource,
    revision: str,
    repo_id: str = MODEL_REPO_ID,
    progress: Progress | None = None,
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
) -> SyncResult:
    """Copy the source's model files that the bucket lacks, then write the manifest (last)."""
    prefix = normalize_prefix(prefix)
    files = source.list_files()
    _check_source(files, source.label)
    old_manifest = read_manifest(s3=s3, bucket=bucket, prefix=prefix)
    remote = _RemoteState(s3=s3, bucket=bucket, prefix=prefix, manifest=old_manifest)
    # Parts of at most 16 MiB upload in parallel; S3 needs parts of at least 5 MiB.
    chunk = max(5 * 1024 * 1024, min(multipart_threshold, 16 * 1024 * 1024))
    transfer = TransferConfig(multipart_threshold=multipart_threshold, multipart_chunksize=chunk)
    result = SyncResult(bucket=bucket, prefix=prefix)
    overall: TaskID | None = None
    if progress is not None:
        overall = progress.add_task("model files", total=sum(f.size for f in files))

    def advance(task: TaskID | None, amount: int) -> None:
        if progress is not None and task is not None:
            progress.advance(task, amount)

    entries: list[dict[str, Any]] = []
    for file in files:
        if file.sha256 and remote.has(file.path, size=file.size, sha256=file.sha256):
            result.present.append(file.path)
            entries.append({"path": file.path, "size": file.size, "sha256": file.sha256})
            advance(overall, file.size)
            continue
        fetch_task = progress.add_task(f"fetch {file.path}", total=file.size) if progress else None

        def fetched(n: int, task: TaskID | None = fetch_task) -> None:
            advance(task, n)

        with source.fetch(file, on_bytes=fetched) as local:
            if progress is not None and fetch_task is not None:
                progress.remove_task(fetch_task)
            sha = _verified_sha(Path(local), file, source.label)
            entries.append({"path": file.path, "size": file.size, "sha256": sha})
            if remote.has(file.path, size=file.size, sha256=sha):
                result.present.append(file.path)
                advance(overall, file.size)
                continue
            s3.upload_file(
                str(local),
                bucket,
                prefix + file.path,
                ExtraArgs={"Metadata": {SHA_METADATA_KEY: sha}},
                Config=transfer,
                Callback=lambda n: advance(overall, n),
            )
            result.copied.append(file.path)

    manifest = {
        "model": repo_id,
        "revision": revision,
        "files": sorted(entries, key=lambda e: e["path"]),
        "synced_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    unchanged = old_manifest is not None and {k: v for k, v in old_manifest.items() if k != "synced_at"} == {
        k: v for k, v in manifest.items() if k != "synced_at"
    }
    if unchanged and not result.copied:
        result.manifest = old_manifest or manifest
    else:
        s3.put_object(
            Bucket=bucket,
            Key=prefix + MANIFEST_NAME,
            Body=json.dumps(manifest, indent=2).encode(),
            ContentType="application/json",
        )
        result.manifest, result.manifest_written = manifest, True
    return result


def manifest_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest facts `status` reports: model, revision, file count, total bytes."""
    files = [f for f in manifest.get("files", []) if isinstance(f, dict)]
    return {
        "model": manifest.get("model"),
        "revision": manifest.get("revision"),
        "file_count": len(files),
        "total_bytes": sum(int(f.get("size", 0)) for f in files),
        "synced_at": manifest.get("synced_at"),
    }
