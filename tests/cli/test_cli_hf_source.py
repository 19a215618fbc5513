"""HuggingFaceSource against a local stand-in for the Hub's HTTP API (there is no network here).

Exercises the real urllib code: tree listing with pagination, downloads, and verification of
LFS sha256 and git blob ids.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, ClassVar

import pytest
from clitest_support import REVISION, session

from cli.model_cache import sync_model_cache
from cli.model_sources import HuggingFaceSource, SyncError

if TYPE_CHECKING:
    from conftest import AwsEnv  # the fixtures' types

REPO = "hexgrad/Kokoro-82M"
FILES = {
    "config.json": b'{"n_token": 178}',
    "kokoro-v1_0.pth": os.urandom(5_000),
    "voices/af_heart.pt": os.urandom(700),
    "README.md": b"# Kokoro\n",
}
LFS = {"kokoro-v1_0.pth", "voices/af_heart.pt"}


def _entry(path: str) -> dict[str, object]:
    data = FILES[path]
    entry: dict[str, object] = {
        "type": "file",
        "path": path,
        "size": len(data),
        "oid": hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest(),
    }
    if path in LFS:
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}
    return entry


class _Hub(BaseHTTPRequestHandler):
    served: ClassVar[list[str]] = []
    tampered: ClassVar[dict[str, bytes]] = {}

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: bytes, headers: dict[str, str] | None = None, status: int = 200) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        tree = f"/api/models/{REPO}/tree/{REVISION}"
        resolve = f"/{REPO}/resolve/{REVISION}/"
        if self.path == tree + "?recursive=true":
            page = [{"type": "directory", "path": "voices", "oid": "x", "size": 0},
                    _entry("README.md"), _entry("config.json")]
            address = self.server.server_address
            assert isinstance(address, tuple)  # an IPv4 (host, port)
            nxt = f"http://127.0.0.1:{address[1]}{tree}?recursive=true&cursor=2"
            self._send(json.dumps(page).encode(), {"Link": f'<{nxt}>; rel="next"'})
        elif self.path == tree + "?recursive=true&cursor=2":
            self._send(json.dumps([_entry("kokoro-v1_0.pth"), _entry("voices/af_heart.pt")]).encode())
        elif self.path.startswith(resolve) and self.path[len(resolve):] in FILES:
            name = self.path[len(resolve):]
            self.served.append(name)
            self._send(self.tampered.get(name, FILES[name]))
        else:
            self._send(b"not found", status=404)


@pytest.fixture
def hub() -> Iterator[str]:
    _Hub.served.clear()
    _Hub.tampered.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_lists_wanted_files_across_pages(hub: str) -> None:
    files = HuggingFaceSource(REPO, REVISION, endpoint=hub, token="").list_files()
    assert [f.path for f in files] == ["config.json", "kokoro-v1_0.pth", "voices/af_heart.pt"]
    pth = files[1]
    assert pth.sha256 == hashlib.sha256(FILES["kokoro-v1_0.pth"]).hexdigest() and pth.size == 5_000
    assert files[0].sha256 is None and files[0].git_blob_sha1


def test_sync_from_hub_then_rerun_downloads_only_small_files(aws: AwsEnv, hub: str) -> None:
    s3 = session().client("s3")
    s3.create_bucket(Bucket="hub-cache")
    source = HuggingFaceSource(REPO, REVISION, endpoint=hub, token="")
    first = sync_model_cache(s3=s3, bucket="hub-cache", prefix="models/kokoro-82m/r/", source=source, revision=REVISION)
    assert first.summary == "3 copied, 0 already present"
    body = s3.get_object(Bucket="hub-cache", Key="models/kokoro-82m/r/voices/af_heart.pt")["Body"].read()
    assert body == FILES["voices/af_heart.pt"]
    _Hub.served.clear()
    again = sync_model_cache(s3=s3, bucket="hub-cache", prefix="models/kokoro-82m/r/", source=source, revision=REVISION)
    assert again.summary == "0 copied, 3 already present"
    assert _Hub.served == ["config.json"]  # LFS files are compared by their published sha256


@pytest.mark.parametrize(
    ("name", "match"),
    [("voices/af_heart.pt", "published sha256"), ("config.json", "git object id")],
)
def test_tampered_download_is_refused(hub: str, name: str, match: str) -> None:
    _Hub.tampered[name] = bytes(b ^ 0xFF for b in FILES[name])  # same size, other bytes
    source = HuggingFaceSource(REPO, REVISION, endpoint=hub, token="")
    file = next(f for f in source.list_files() if f.path == name)
    with pytest.raises(SyncError, match=match), source.fetch(file):
        pass


def test_unknown_revision_is_a_clear_error(hub: str) -> None:
    with pytest.raises(SyncError, match="HTTP 404"):
        HuggingFaceSource(REPO, "0" * 40, endpoint=hub, token="").list_files()
