"""Text normalization judged by ear: a share of the by-ear corpus (bench/normalization_corpus.py)
spoken by the real server (int8 ONNX weights, af_heart), with ``normalize`` on and off, and
transcribed by pocketsphinx. The whole corpus is ``make bench-normalization``'s
(bench/results/normalization.json); the thresholds below come from it (docs/normalization.md)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest
import real_audio as ra

from bench.normalization import VOICE, hear
from bench.normalization_corpus import CORPUS, TEST_SUBSET

if TYPE_CHECKING:
    from kokoro_harness import Server

pytestmark = pytest.mark.kokoro

# Measured (bench/results/normalization.json, the rows of TEST_SUBSET): mean WER 0.04 with
# normalization and 0.36 without. The guard leaves room for pocketsphinx's spread, not for
# a rule that stops working (one of the six sentences read as written again costs ~0.1 of the mean).
MAX_MEAN_WER_ON = 0.2
MIN_GAIN = 0.2  # mean WER off minus on


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from kokoro_harness import start_server

    server = start_server(ra.packaged_dir(), tmp_path_factory.mktemp("normalize-by-ear") / "server.log",
                          env={"KOKORO_DEFAULT_VOICE": VOICE})
    try:
        yield server
    finally:
        server.stop()


def test_a_listener_hears_what_a_person_would_read(real_server: Server) -> None:
    rows = [CORPUS[i] for i in TEST_SUBSET]
    on: list[float] = []
    off: list[float] = []
    heard: list[str] = []
    with httpx.Client() as client:
        for _, written, reference in rows:
            wer_on, words_on = hear(client, real_server.http, written, reference, normalize=True)
            wer_off, _ = hear(client, real_server.http, written, reference, normalize=False)
            on.append(wer_on)
            off.append(wer_off)
            heard.append(f"{wer_on:.2f} {written!r} -> {' '.join(words_on)!r}")
    report = "\n".join(heard)
    assert statistics.mean(on) <= MAX_MEAN_WER_ON, report
    assert statistics.mean(off) - statistics.mean(on) >= MIN_GAIN, (statistics.mean(off), report)
