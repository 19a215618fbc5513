"""Where model files come from: the Hugging Face Hub, or a local directory with the same layout.

Both sources answer two questions: which files are there (with size and, when known up front,
their sha256), and give me a local copy of this one. The sync does the rest.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cli.aws import CliError
from infra.defaults import MODEL_REPO_ID as MODEL_REPO_ID  # named once, in infra/defaults.py
from infra.defaults import shared_defaults

MODEL_REVISION: str = shared_defaults()["modelRevision"]
MODEL_FILES = ("config.json", "kokoro-v1_0.pth", "voices/*.pt")
HF_ENDPOINT = "https://huggingface.co"
_CHUNK = 1024 * 1024
_LINK_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')

ByteCallback = Callable[[int], None]


class SyncError(CliError):
    """The model files could not be read, or did not match what the source promised."""


@dataclass(frozen=True)
class SourceFile:
    """One file of the model: its path relative to the model dir, size and known hashes."""

    path: str
    size: int
    sha256: str | None = None
    git_blob_sha1: str | None = None


class ModelSource(Protocol):
    """The interface the sync needs from a source of model files."""

    @property
    def label(self) -> str:
        """Where the files come from, for messages."""
        ...

    def list_files(self) -> list[SourceFile]:
        """The model files (filtered to the ones the container loads)."""
        ...

    def fetch(self, file: SourceFile, *, on_bytes: ByteCallback | None = None) -> Any:
        """A context manager yielding a local Path holding the file's bytes."""
        ...


def wanted(path: str, patterns: Sequence[str] = MODEL_FILES) -> bool:
    """Keep only the files the Kokoro container loads (no samples, docs, ONNX exports...)."""
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def file_sha256(path: Path, *, on_bytes: ByteCallback | None = None) -> str:
    """Stream a file through sha256."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            if on_bytes:
                on_bytes(len(chunk))
    return digest.hexdigest()


class LocalDirSource:
    """A directory laid out like the model repo (config.json, kokoro-v1_0.pth, voices/*.pt)."""

    def __init__(self, path: Path, *, patterns: Sequence[str] = MODEL_FILES) -> None:
        self.root = Path(path).expanduser()
        self.patterns = tuple(patterns)
        self._files: list[SourceFile] | None = None  # hashed once, reused by preflight and sync

    @property
    def label(self) -> str:
        return str(self.root)

    def list_files(self) -> list[SourceFile]:
        """Walk the directory and hash every wanted file (the hash is what S3 is compared with)."""
        if self._files is not None:
            return list(self._files)
        if not self.root.is_dir():
            raise SyncError(f"Model directory {self.root} does not exist or is not a directory.")
        files: list[SourceFile] = []
        for item in sorted(self.root.rglob("*")):
            rel = item.relative_to(self.root).as_posix()
            # is_file()/stat() follow symlinks, so a Hugging Face cache snapshot dir works too.
            if item.is_file() and wanted(rel, self.patterns):
                files.append(SourceFile(rel, item.stat().st_size, file_sha256(item)))
        self._files = files
        return list(files)

    @contextmanager
    def fetch(self, file: SourceFile, *, on_bytes: ByteCallback | None = None) -> Iterator[Path]:
        """The file is already local: hand out its path."""
        path = (self.root / file.path).resolve()
        if not path.is_file():
            raise SyncError(f"{file.path} disappeared from {self.root} during the sync.")
        if on_bytes:
            on_bytes(file.size)
        yield path


class HuggingFaceSource:
    """Files of a Hugging Face model repo at a pinned revision, downloaded with urllib.

    The tree API gives every file's size; LFS files also carry their sha256 (``lfs.oid``),
    small files their git blob sha1 (``oid``). Downloads are verified against those.
    """

    def __init__(
        self,
        repo_id: str = MODEL_REPO_ID,
        revision: str = MODEL_REVISION,
        *,
        endpoint: str = HF_ENDPOINT,
        token: str | None = None,
        patterns: Sequence[str] = MODEL_FILES,
        timeout_s: float = 60.0,
    ) -> None:
        self.repo_id = repo_id
        self.revision = revision
        self.endpoint = endpoint.rstrip("/")
        self.token = token if token is not None else os.environ.get("HF_TOKEN")
        self.patterns = tuple(patterns)
        self.timeout_s = timeout_s

    @property
    def label(self) -> str:
        return f"{self.endpoint}/{self.repo_id}@{self.revision[:12]}"

    def _open(self, url: str) -> Any:
        headers = {"User-Agent": "kokoro-voice-tools-cli"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            raise SyncError(
                f"Hugging Face returned HTTP {exc.code} for {url}.",
                hint="Check the revision; for gated/private repos set HF_TOKEN. "
                "Or pass --model-dir with files you already have.",
            ) from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise SyncError(
                f"Could not reach Hugging Face ({url}): {getattr(exc, 'reason', exc)}.",
                hint="Check your network/proxy, or pass --model-dir with a local copy of the model.",
            ) from exc

    def list_files(self) -> list[SourceFile]:
        """List the repo tree at the revision (following pagination) and keep the wanted files."""
        repo = urllib.parse.quote(self.repo_id, safe="/")
        rev = urllib.parse.quote(self.revision, safe="")
        url: str | None = f"{self.endpoint}/api/models/{repo}/tree/{rev}?recursive=true"
        files: list[SourceFile] = []
        while url:
            with self._open(url) as resp:
                entries = json.load(resp)
                link = resp.headers.get("Link") or ""
            for entry in entries:
                path = str(entry.get("path", ""))
                if entry.get("type") != "file" or not wanted(path, self.patterns):
                    continue
                lfs = entry.get("lfs") or {}
                files.append(
                    SourceFile(
                        path=path,
                        size=int(lfs.get("size", entry.get("size", 0))),
                        sha256=lfs.get("oid"),
                        git_blob_sha1=None if lfs else entry.get("oid"),
                    )
                )
            match = _LINK_NEXT.search(link)
            url = match[1] if match else None
        if not files:
            raise SyncError(f"No model files found in {self.label}.", hint="Check --model-revision.")
        return sorted(files, key=lambda f: f.path)

    @contextmanager
    def fetch(self, file: SourceFile, *, on_bytes: ByteCallback | None = None) -> Iterator[Path]:
        """Stream the file to a temp file, verifying size and hash before handing it out."""
        url = (
            f"{self.endpoint}/{urllib.parse.quote(self.repo_id, safe='/')}/resolve/"
            f"{urllib.parse.quote(self.revision, safe='')}/{urllib.parse.quote(file.path)}"
        )
        sha256 = hashlib.sha256()
        blob = hashlib.sha1(f"blob {file.size}\0".encode(), usedforsecurity=False)
        size = 0
        with tempfile.TemporaryDirectory(prefix="kokoro-model-") as tmp:
            target = Path(tmp) / "file"
            with self._open(url) as resp, target.open("wb") as fh:
                while chunk := resp.read(_CHUNK):
                    fh.write(chunk)
                    sha256.update(chunk)
                    blob.update(chunk)
                    size += len(chunk)
                    if on_bytes:
                        on_bytes(len(chunk))
            if size != file.size:
                raise SyncError(f"Download of {file.path} has {size} bytes, expected {file.size}.")
            if file.sha256 and sha256.hexdigest() != file.sha256:
                raise SyncError(f"Download of {file.path} does not match its published sha256; refusing it.")
            if file.git_blob_sha1 and blob.hexdigest() != file.git_blob_sha1:
                raise SyncError(f"Download of {file.path} does not match its git object id; refusing it.")
            yield target
