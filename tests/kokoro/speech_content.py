"""What a listener hears, measured: pocketsphinx's word error rate on Kokoro's English voices,
spoken by the real server over each route and format, against the text that was sent.

    .venv-kokoro/bin/python tests/kokoro/speech_content.py [--out bench/results/speech_content.json]

writes the figures docs/models.md quotes; tests/kokoro/test_speech_content.py takes the same
measurements and asserts on them. Routes: one WebSocket speaking the sentences as utterances (pcm),
``POST /invocations`` as pcm and as each compressed format (decoded back with PyAV), the server
with windowed decoding on at a fixed pace (ra.SERVED_PACE, so its windows do not depend on the
machine's load); one-shot decoding in this process (the engine alone, no windows); a blend and its
other part. Each route's error rate is pooled over the sentences (errors / words); against a
different sentence (each transcript scored against the next sentence's text) it is ~1, the floor
of a recognizer that hears nothing of what was said.

The server's output is deterministic, so a second run gives the same transcripts: the noise of
the measure is the recognizer's sensitivity to inaudible changes, measured here by decoding the
same pcm 1 dB quieter and one sample later (the ``jitter`` routes).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import real_audio as ra

VOICE = "af_heart"
OTHER_VOICE = "am_michael"
BLEND = f"{VOICE}+{OTHER_VOICE}"
JAPANESE = "jf_alpha"  # the default offline voice before the English ones, for comparison: reading
# English (lang "a"), as it did then; its own language's reading is checked in test_languages_real.py
SENTENCES = (  # 29 words
    "The weather will be warm and sunny this afternoon.",
    "She opened the window and let the fresh air in.",
    "The meeting has been moved to next Thursday at ten.",
)
COMPRESSED = ("mp3", "opus", "aac", "flac")
TIMEOUT_S = 120.0


def decode(data: bytes) -> np.ndarray:
    """Any container PyAV reads, as float32 mono at 24 kHz, scaled as ra.s16le_to_float scales pcm
    (so lossless audio decodes to the same floats)."""
    import av

    out: list[np.ndarray] = []
    with av.open(io.BytesIO(data), mode="r") as container:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=ra.SR)
        for frame in container.decode(audio=0):
            out.extend(piece.to_ndarray().reshape(-1) for piece in resampler.resample(frame))
        out.extend(piece.to_ndarray().reshape(-1) for piece in resampler.resample(None))
    return (np.concatenate(out) * (32768 / 32767)).astype(np.float32) if out else np.zeros(0, np.float32)


def post(base_url: str, text: str, *, voice: str, fmt: str = "pcm", lang: str | None = None) -> np.ndarray:
    import httpx

    body = {"text": text, "voice": voice, "format": fmt, **({"lang": lang} if lang else {})}
    response = httpx.post(f"{base_url}/invocations", json=body, timeout=TIMEOUT_S)
    assert response.status_code == 200, f"{fmt} {voice}: {response.status_code} {response.text[:300]}"
    return ra.s16le_to_float(response.content) if fmt == "pcm" else decode(response.content)


def websocket(ws_url: str, texts: tuple[str, ...], *, voice: str) -> list[np.ndarray]:
    """Each text as an utterance over one WebSocket, pcm; the audio of each."""
    import websockets

    async def run() -> list[np.ndarray]:
        audio: dict[str, bytes] = {f"s{i}": b"" for i in range(len(texts))}
        current = None
        async with websockets.connect(ws_url, max_size=None, open_timeout=10) as ws:
            for uid, text in zip(audio, texts):
                await ws.send(json.dumps({"type": "speak", "id": uid, "text": text, "voice": voice}))
            while True:
                frame = await asyncio.wait_for(ws.recv(), TIMEOUT_S)
                if isinstance(frame, bytes):
                    assert current is not None, "audio outside an utterance"
                    audio[current] += frame
                    continue
                event = json.loads(frame)
                assert event["type"] != "error", event
                if event["type"] == "utterance_start":
                    current = event["id"]
                elif event["type"] == "utterance_end" and event["id"] == f"s{len(texts) - 1}":
                    await ws.send(json.dumps({"type": "close"}))
                    return [ra.s16le_to_float(audio[uid]) for uid in audio]

    return asyncio.run(run())


def score(heard: list[list[str]], audio: list[np.ndarray], texts: tuple[str, ...] = SENTENCES) -> dict[str, Any]:
    """Per-sentence WER of the transcripts, the pooled WER, and the pooled WER against the next sentence."""
    words = [len(ra.words(t)) for t in texts]
    errors = [ra.wer(h, t) * n for h, t, n in zip(heard, texts, words)]
    others = [texts[(i + 1) % len(texts)] for i in range(len(texts))]
    against_other = [ra.wer(h, t) * len(ra.words(t)) for h, t in zip(heard, others)]
    return {
        "errors": round(sum(errors)),  # words the recognizer got wrong, pooled (edit distance: whole words)
        "wer": round(sum(errors) / sum(words), 4),
        "wer_other_sentence": round(sum(against_other) / sum(len(ra.words(t)) for t in others), 4),
        "per_sentence": [round(e / n, 3) for e, n in zip(errors, words)],
        "heard": [" ".join(h) for h in heard],
        "seconds": [round(len(x) / ra.SR, 2) for x in audio],
    }


def routes(base_url: str, ws_url: str) -> dict[str, Callable[[], list[np.ndarray]]]:
    """Every measured route, by name, as a thunk returning one audio per sentence."""
    table: dict[str, Callable[[], list[np.ndarray]]] = {
        "post pcm": lambda: [post(base_url, t, voice=VOICE) for t in SENTENCES],
        "websocket pcm": lambda: websocket(ws_url, SENTENCES, voice=VOICE),
    }
    def post_as(fmt: str) -> Callable[[], list[np.ndarray]]:
        return lambda: [post(base_url, t, voice=VOICE, fmt=fmt) for t in SENTENCES]

    for fmt in COMPRESSED:
        table[f"post {fmt}"] = post_as(fmt)
    table["one-shot (engine)"] = lambda: [np.asarray(ra.speak(t, VOICE)) for t in SENTENCES]
    table[f"post pcm {OTHER_VOICE}"] = lambda: [post(base_url, t, voice=OTHER_VOICE) for t in SENTENCES]
    table[f"post pcm {BLEND}"] = lambda: [post(base_url, t, voice=BLEND) for t in SENTENCES]
    return table


class Recogniser:
    """pocketsphinx in a process of its own (it holds the GIL for seconds), so it transcribes one
    route while the server speaks the next; audio identical to audio already heard is not heard again."""

    def __init__(self) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        self._seen: dict[bytes, Future[list[str]]] = {}

    def submit(self, audio: list[np.ndarray], *, like: list[np.ndarray] | None = None,
               heard: list[Future[list[str]]] | None = None) -> list[Future[list[str]]]:
        """Transcribe ``audio``; when every piece is within 1 LSB of ``like`` (the audio ``heard``
        transcribed), its transcripts are those: 1 LSB (-90 dBFS) cannot change a word."""
        if like is not None and heard is not None and within_1_lsb(audio, like):
            return heard
        futures = []
        for x in audio:
            key = hashlib.sha256(np.ascontiguousarray(x).tobytes()).digest()
            if key not in self._seen:
                self._seen[key] = self._pool.submit(ra.recognise, x)
            futures.append(self._seen[key])
        return futures

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)


def within_1_lsb(audio: list[np.ndarray], like: list[np.ndarray]) -> bool:
    return all(len(a) == len(b) and float(np.abs(a - b).max(initial=0.0)) <= 1.01 / 32767 for a, b in zip(audio, like))


LOSSLESS = ("websocket pcm", "post flac")  # the same samples as post pcm, up to float-to-int rounding


def measure(base_url: str, ws_url: str, *, full: bool = False) -> dict[str, Any]:
    """Every route's audio, scored. ``full`` (the script, not the test): also the recognizer's own
    noise (the same pcm 1 dB quieter and one sample later), and the Japanese voice jf_alpha."""
    audio: dict[str, list[np.ndarray]] = {}
    heard: dict[str, list[Future[list[str]]]] = {}
    recogniser = Recogniser()
    try:
        table = routes(base_url, ws_url)
        if full:
            table[f"post pcm {JAPANESE}"] = lambda: [post(base_url, t, voice=JAPANESE, lang="a") for t in SENTENCES]
        for name, speak in table.items():
            audio[name] = speak()
            if name in LOSSLESS:
                heard[name] = recogniser.submit(audio[name], like=audio["post pcm"], heard=heard["post pcm"])
            else:
                heard[name] = recogniser.submit(audio[name])
        if full:
            pcm = audio["post pcm"]
            audio["jitter: 1 dB quieter"] = [(x * 10 ** (-1 / 20)).astype(np.float32) for x in pcm]
            audio["jitter: one sample later"] = [np.concatenate([np.zeros(1, np.float32), x]) for x in pcm]
            for name in ("jitter: 1 dB quieter", "jitter: one sample later"):
                heard[name] = recogniser.submit(audio[name])
        found: dict[str, Any] = {"voice": VOICE, "sentences": list(SENTENCES), "routes": {
            name: score([f.result(timeout=TIMEOUT_S) for f in heard[name]], audio[name]) for name in heard}}
    finally:
        recogniser.close()
    found["windowed_differs_from_one_shot"] = any(
        len(a) != len(b) or float(np.abs(a - b).max()) > 3 / 32767
        for a, b in zip(audio["post pcm"], audio["one-shot (engine)"]))
    found["within_1_lsb_of_post_pcm"] = [name for name in LOSSLESS if within_1_lsb(audio[name], audio["post pcm"])]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ra.REPO / "bench" / "results" / "speech_content.json")
    args = parser.parse_args(argv)
    import tempfile

    from kokoro_harness import start_server

    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(ra.packaged_dir(), Path(tmp) / "server.log",
                              env={"KOKORO_DECODER_PACE": str(ra.SERVED_PACE)})
        try:
            found = measure(server.http, server.ws, full=True)
        finally:
            server.stop()
    for name, route in found["routes"].items():
        print(f"{name:28} WER {route['wer']:.3f} (against another sentence {route['wer_other_sentence']:.2f})")
    args.out.write_text(json.dumps(found, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
