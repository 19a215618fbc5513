"""A throwaway certificate authority, made at start, so clients verify TLS without touching trust stores."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True, kw_only=True)
class TlsFiles:
    """PEM files: the CA a client trusts (``AWS_CA_BUNDLE``) and the server's certificate and key."""

    ca_bundle: Path
    certfile: Path
    keyfile: Path


def make_tls_files(directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> TlsFiles:
    """A new CA and a server certificate for ``hosts``, written under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="voicestream sagemaker-local test CA")
    leaf = ca.issue_cert(*hosts)
    files = TlsFiles(ca_bundle=directory / "ca.pem", certfile=directory / "server.pem",
                     keyfile=directory / "server.key")
    ca.cert_pem.write_to_path(str(files.ca_bundle))
    leaf.cert_chain_pems[0].write_to_path(str(files.certfile))
    for extra in leaf.cert_chain_pems[1:]:
        extra.write_to_path(str(files.certfile), append=True)
    leaf.private_key_pem.write_to_path(str(files.keyfile))
    files.keyfile.chmod(0o600)
    return files
