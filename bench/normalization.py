"""Text normalization by ear: the corpus (bench/normalization_corpus.py) spoken through the real
server (int8 ONNX weights, af_heart) with ``normalize`` on and off in the same run, each render
transcribed by pocketsphinx and scored against the reading a person would give::

    .venv-kokoro/bin/python -m bench.normalization [--out bench/results/normalization.json]

(``make bench-normalization``.) Mean word error rate per kind and overall, and what was heard.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from .hearing import recognise, wer

REPO = Path(__file__).resolve().parent.parent
VOICE = "af_heart"


def speak(client: httpx.Client, base_url: str, text: str, *, normalize: bool) -> np.ndarray:
    """The server's PCM for ``text`` (POST /invocations), as float samples."""
    response = client.post(f"{base_url}/invocations", timeout=120.0, json={
        "text": text, "voice": VOICE, "format": "pcm", "normalize": normalize})
    response.raise_for_status()
    return np.frombuffer(response.content, dtype="<i2").astype(np.float32) / 32768.0


def hear(client: httpx.Client, base_url: str, text: str, reference: str, *, normalize: bool) -> tuple[float, list[str]]:
    heard = recognise(speak(client, base_url, text, normalize=normalize))
    return wer(heard, reference), heard


def unchanged(text: str) -> bool:
    """Whether normalization leaves every piece the server cuts from ``text`` as it is (then ``off``
    sends G2P the same text as ``on``: its render is not repeated)."""
    from kokoro_server.normalize import normalize
    from voicestream.chunker import iter_sentences

    return all(normalize(piece).text == piece for piece in iter_sentences(text))


def order(corpus: tuple[tuple[str, str, str], ...]) -> list[tuple[str, str, str]]:
    """Round-robin over the kinds, so a run cut short still covers every kind."""
    kinds: dict[str, list[tuple[str, str, str]]] = {}
    for row in corpus:
        kinds.setdefault(row[0], []).append(row)
    queues = list(kinds.values())
    out: list[tuple[str, str, str]] = []
    while any(queues):
        out += [queue.pop(0) for queue in queues if queue]
    return out


def summary(rows: list[dict[str, object]], total: int) -> dict[str, object]:
    kinds = list(dict.fromkeys(str(r["kind"]) for r in rows))

    def mean(key: str, kind: str | None = None) -> float:
        return round(statistics.mean(float(str(r[key])) for r in rows if kind is None or r["kind"] == kind), 3)

    return {
        "sentences": len(rows), "corpus_sentences": total, "complete": len(rows) == total,
        "mean_wer_on": mean("wer_on"), "mean_wer_off": mean("wer_off"),
        "by_kind": {kind: {"sentences": sum(r["kind"] == kind for r in rows), "wer_on": mean("wer_on", kind),
                           "wer_off": mean("wer_off", kind)} for kind in kinds},
        "rows": rows,
    }


def measure(base_url: str, corpus: tuple[tuple[str, str, str], ...],
            progress: Callable[[dict[str, object]], object] = lambda _: None) -> dict[str, object]:
    """Every sentence on and off; ``progress`` gets the summary so far after each one."""
    rows: list[dict[str, object]] = []
    with httpx.Client() as client:
        for kind, written, reference in order(corpus):
            on, heard_on = hear(client, base_url, written, reference, normalize=True)
            same = unchanged(written)
            off, heard_off = (on, heard_on) if same else hear(client, base_url, written, reference, normalize=False)
            rows.append({"kind": kind, "text": written, "reference": reference, "wer_on": round(on, 3),
                         "wer_off": round(off, 3), "heard_on": " ".join(heard_on), "heard_off": " ".join(heard_off),
                         "off_renders_the_same_text": same})
            print(f"{kind:14} on {on:4.2f} off {off:4.2f}  {written!r}", file=sys.stderr)
            progress(summary(rows, len(corpus)))
    return summary(rows, len(corpus))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.normalization", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "normalization.json")
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "kokoro-82m-onnx")
    args = parser.parse_args(argv)
    from kokoro_tools.packaged_weights import build_model_dir, installed_sources
    from voicestream.launch import KokoroProcess

    from .normalization_corpus import CORPUS

    model_dir = build_model_dir(args.model_dir, sources=installed_sources(english=True)).root
    started = time.perf_counter()
    log = Path(tempfile.mkdtemp(prefix="bench-normalization-")) / "server.log"  # its tail is in any LaunchError
    header = {"voice": VOICE, "engine": "onnx int8 (packaged weights)", "route": "POST /invocations",
              "transcriber": "pocketsphinx (US English model)"}

    def write(partial: dict[str, object]) -> dict[str, object]:  # after every sentence: a cut run keeps its rows
        body = {**header, "elapsed_s": round(time.perf_counter() - started, 1), **partial}
        args.out.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
        return body

    with KokoroProcess(model_dir=model_dir, env={"KOKORO_DEFAULT_VOICE": VOICE}, log_path=log) as server:
        result = write(measure(server.url, CORPUS, progress=write))
    print(f"{result['sentences']} sentences: mean WER {result['mean_wer_on']} with normalization, "
          f"{result['mean_wer_off']} without")
    by_kind: dict[str, dict[str, float]] = result["by_kind"]  # type: ignore[assignment]
    for kind, row in by_kind.items():
        print(f"  {kind:14} {row['sentences']:2} sentences: {row['wer_on']:.3f} on, {row['wer_off']:.3f} off")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
