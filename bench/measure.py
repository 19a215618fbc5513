"""The measurements: a Kokoro server subprocess, and one async runner per thing we time.

Every runner talks to the server over loopback with raw ``httpx`` / ``websockets`` (not the
voicestream clients) so the timestamps are taken exactly where the bytes arrive. Time zero of a
scenario run is the start of the agent's answer (see bench.scenario); "first audio" is the first
non-empty HTTP body chunk or the first binary WebSocket frame, "last audio" the last one.

Every wait is bounded (``RUN_TIMEOUT_S`` and friends) so a wedged server fails the benchmark
instead of hanging it.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from voicestream.chunker import IncrementalSentenceChunker
from voicestream.protocol import PCM_BYTES_PER_SECOND

from .scenario import Scenario, play

PCM_BYTES_PER_S = PCM_BYTES_PER_SECOND  # s16le mono at the protocol's native 24 kHz
BIDI_PATH = "/invocations-bidirectional-stream"
RUN_TIMEOUT_S = 600.0  # one scenario run, start to last audio
FIRST_AUDIO_TIMEOUT_S = 120.0
LEAD_S = 0.05  # time zero is this far after the runner is ready, so setup never eats into it
CODECS = ("pcm", "wav", "mp3", "opus", "aac", "flac")


class BenchError(RuntimeError):
    """The server refused something or broke the protocol; the message says what."""


def now() -> float:
    return time.perf_counter()


def spread(samples: Sequence[float], *, digits: int = 1) -> dict[str, Any]:
    """p50/p95/min/max/n of ``samples`` (numpy's linear percentiles; p95 of few samples is close
    to the max). Empty input gives n=0 and no statistics."""
    values = [float(v) for v in samples if v is not None and math.isfinite(v)]
    if not values:
        return {"n": 0}
    arr = np.asarray(values)
    return {
        "p50": round(float(np.percentile(arr, 50)), digits),
        "p95": round(float(np.percentile(arr, 95)), digits),
        "min": round(float(arr.min()), digits),
        "max": round(float(arr.max()), digits),
        "n": len(values),
    }


@dataclass
class Trace:
    """What one run saw, in seconds since its time zero."""

    mode: str
    full: bool
    text: list[tuple[float, int]] = field(default_factory=list)  # (t, cumulative chars released)
    pieces: list[tuple[float, str]] = field(default_factory=list)  # chunker output, when sent
    audio: list[tuple[float, int]] = field(default_factory=list)  # (t, bytes in this chunk)
    first_audio_s: float | None = None
    last_audio_s: float | None = None
    first_send_s: float | None = None  # bidi: when the first `speak` left
    first_synthesis_ms: float | None = None  # bidi: the first utterance's model time before its first audio
    synthesis_ms: float = 0.0  # bidi: sum over utterances
    utterances: int = 0

    def add_text(self, t: float, token: str) -> None:
        chars = (self.text[-1][1] if self.text else 0) + len(token)
        self.text.append((t, chars))

    def add_audio(self, t: float, size: int) -> None:
        if size <= 0:
            return
        if self.first_audio_s is None:
            self.first_audio_s = t
        self.last_audio_s = t if self.last_audio_s is None else max(self.last_audio_s, t)
        self.audio.append((t, size))

    @property
    def audio_bytes(self) -> int:
        return sum(size for _, size in self.audio)

    @property
    def audio_s(self) -> float:
        return self.audio_bytes / PCM_BYTES_PER_S

    @property
    def ws_ttfa_ms(self) -> float | None:
        """bidi: first binary frame minus the first `speak`'s send time."""
        if self.first_audio_s is None or self.first_send_s is None:
            return None
        return (self.first_audio_s - self.first_send_s) * 1000

    @property
    def overhead_ms(self) -> float | None:
        ttfa = self.ws_ttfa_ms
        if ttfa is None or self.first_synthesis_ms is None:
            return None
        return ttfa - self.first_synthesis_ms

    def timeline(self) -> dict[str, Any]:
        """Cumulative text (chars) and audio (seconds) over time, for the plot and the JSON."""
        audio: list[list[float]] = []
        total = 0
        for t, size in sorted(self.audio):
            total += size
            audio.append([round(t, 4), round(total / PCM_BYTES_PER_S, 4)])
        return {
            "text": [[round(t, 4), c] for t, c in self.text],
            "pieces": [[round(t, 4), p] for t, p in self.pieces],
            "audio": audio,
        }


@dataclass
class Target:
    """Where the server is."""

    base_url: str

    @property
    def invocations(self) -> str:
        return f"{self.base_url}/invocations"

    @property
    def ws_url(self) -> str:
        return "ws" + self.base_url.removeprefix("http") + BIDI_PATH


async def open_ws(target: Target) -> ClientConnection:
    return await connect(target.ws_url, proxy=None, max_size=4 * 1024 * 1024, open_timeout=30,
                         ping_interval=None)


async def _post_audio(
    client: httpx.AsyncClient, target: Target, body: dict[str, Any], on_data: Callable[[float, int], None],
    *, stop: Callable[[], bool] = lambda: False,
) -> None:
    """POST /invocations (binary), calling ``on_data(now, len)`` per body chunk; stops early
    (closing the connection, which cancels the server's work) once ``stop()`` is true."""
    async with client.stream("POST", target.invocations, json=body) as response:
        if response.status_code != 200:
            raise BenchError(f"POST /invocations: {response.status_code} {(await response.aread())[:500]!r}")
        async for data in response.aiter_raw():
            if data:
                on_data(now(), len(data))
                if stop():
                    return


async def run_batch(client: httpx.AsyncClient, target: Target, scenario: Scenario, *, full: bool) -> Trace:
    """Wait for the whole answer, then one POST for it."""
    trace = Trace(mode="batch", full=full)
    t0 = now() + LEAD_S
    parts: list[str] = []

    def on_token(t: float, token: str) -> None:
        trace.add_text(t, token)
        parts.append(token)

    await play(scenario, t0, on_token)
    text = "".join(parts).strip()
    trace.pieces.append((now() - t0, text))
    await asyncio.wait_for(
        _post_audio(client, target, {"text": text, "format": "pcm", "transport": "binary"},
                    lambda t, n: trace.add_audio(t - t0, n), stop=lambda: not full),
        RUN_TIMEOUT_S,
    )
    return trace


async def run_stream(
    client: httpx.AsyncClient, target: Target, scenario: Scenario, *, full: bool, early_first_fragment: bool = False,
) -> Trace:
    """Sentence streaming over HTTP: each sentence the chunker emits is POSTed at once (requests
    overlap; the player would play them in order). TTFA is the first sentence's first byte."""
    trace = Trace(mode="stream", full=full)
    chunker = IncrementalSentenceChunker(early_first_fragment=early_first_fragment)
    t0 = now() + LEAD_S
    first_audio = asyncio.Event()
    posts: list[asyncio.Task[None]] = []

    first_sentence_audio: list[float] = []

    def on_data(index: int, t: float, size: int) -> None:
        trace.add_audio(t - t0, size)
        if index == 0 and not first_audio.is_set():
            first_sentence_audio.append(t - t0)
            first_audio.set()

    def launch(piece: str) -> None:
        index = len(posts)
        trace.pieces.append((now() - t0, piece))
        body = {"text": piece, "format": "pcm", "transport": "binary"}
        posts.append(asyncio.create_task(
            _post_audio(client, target, body, lambda t, n: on_data(index, t, n), stop=lambda: not full)))

    def on_token(t: float, token: str) -> None:
        trace.add_text(t, token)
        for piece in chunker.feed(token):
            launch(piece)

    async def feed() -> None:
        await play(scenario, t0, on_token)
        for piece in chunker.flush():
            launch(piece)

    feeder = asyncio.create_task(feed())
    try:
        if full:
            await asyncio.wait_for(feeder, RUN_TIMEOUT_S)
            await asyncio.wait_for(asyncio.gather(*posts), RUN_TIMEOUT_S)
        else:
            # Only the first sentence's first byte matters here; the requests still in flight
            # are dropped below (closing their connections cancels the server's work).
            await asyncio.wait_for(first_audio.wait(), FIRST_AUDIO_TIMEOUT_S)
    finally:
        feeder.cancel()
        for post in posts:
            post.cancel()
        await asyncio.gather(feeder, *posts, return_exceptions=True)
        for post in posts:  # surface a refusal instead of hiding it behind cancellation
            if post.done() and not post.cancelled() and post.exception() is not None:
                raise post.exception()  # type: ignore[misc]
    if first_sentence_audio:  # TTFA is the first sentence's, whichever request answered first
        trace.first_audio_s = first_sentence_audio[0]
    return trace


async def bidi_session(
    ws: ClientConnection, scenario: Scenario, t0: float, *, full: bool, mode: str = "bidi",
    early_first_fragment: bool = True,
) -> Trace:
    """One agent turn over an open WebSocket: chunker pieces (early first fragment, as the agent
    cuts them) sent as `speak` the moment they exist, `flush` at the end, until `turn_end`.
    With ``full=False`` it stops after the first utterance_end (cancel, wait for `cancelled`)."""
    trace = Trace(mode=mode, full=full)
    chunker = IncrementalSentenceChunker(early_first_fragment=early_first_fragment)
    first_end = asyncio.Event()
    sent = 0

    async def receiver() -> None:
        async for message in ws:
            if isinstance(message, bytes):
                trace.add_audio(now() - t0, len(message))
                continue
            event = json.loads(message)
            kind = event.get("type")
            if kind == "utterance_end":
                trace.utterances += 1
                trace.synthesis_ms += float(event.get("synthesis_ms", 0))
                if trace.first_synthesis_ms is None:  # model time before the first audio
                    trace.first_synthesis_ms = _first_audio_ms(event)
                    first_end.set()
            elif kind in ("turn_end", "cancelled"):
                return
            elif kind == "error":
                raise BenchError(f"the server sent an error: {event}")
        raise BenchError("the WebSocket closed before turn_end")

    async def send(piece: str) -> None:
        nonlocal sent
        sent += 1
        t = now() - t0
        trace.pieces.append((t, piece))
        if trace.first_send_s is None:
            trace.first_send_s = t
        await ws.send(json.dumps({"type": "speak", "id": f"u{sent}", "text": piece}))

    async def on_token(t: float, token: str) -> None:
        trace.add_text(t, token)
        for piece in chunker.feed(token):
            await send(piece)

    async def feed() -> None:
        await play(scenario, t0, on_token)
        for piece in chunker.flush():
            await send(piece)
        await ws.send(json.dumps({"type": "flush"}))

    rx = asyncio.create_task(receiver())
    feeder = asyncio.create_task(feed())
    try:
        if full:
            await asyncio.wait_for(asyncio.gather(rx, feeder), RUN_TIMEOUT_S)
        else:
            waiter = asyncio.create_task(first_end.wait())
            done, _ = await asyncio.wait({rx, waiter}, timeout=FIRST_AUDIO_TIMEOUT_S,
                                         return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if not done:
                raise BenchError(f"no utterance_end within {FIRST_AUDIO_TIMEOUT_S:.0f} s")
            if rx in done:
                rx.result()  # an error or an early close
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
            if not rx.done():
                await ws.send(json.dumps({"type": "cancel"}))
                await asyncio.wait_for(rx, 30.0)
    finally:
        feeder.cancel()
        rx.cancel()
        await asyncio.gather(feeder, rx, return_exceptions=True)
    return trace


def _first_audio_ms(event: dict[str, Any]) -> float:
    """Model time before an utterance's first audio: with windowed decoding that is the first
    window's, not the whole utterance's (servers before it sent only ``synthesis_ms``)."""
    return float(event.get("first_audio_synthesis_ms", event.get("synthesis_ms", 0)))


async def close_ws(ws: ClientConnection) -> None:
    try:
        await ws.send(json.dumps({"type": "close"}))
    except Exception:  # noqa: BLE001 - closing anyway
        pass
    await ws.close()


async def run_bidi(target: Target, scenario: Scenario, *, full: bool, early_first_fragment: bool = True) -> Trace:
    """One session, opened before time zero (the agent holds it for the conversation)."""
    ws = await open_ws(target)
    try:
        return await bidi_session(ws, scenario, now() + LEAD_S, full=full, early_first_fragment=early_first_fragment)
    finally:
        await close_ws(ws)


RUNNERS: dict[str, Callable[..., Awaitable[Trace]]] = {
    "batch": lambda client, target, scenario, full: run_batch(client, target, scenario, full=full),
    "stream": lambda client, target, scenario, full: run_stream(client, target, scenario, full=full),
    "bidi": lambda client, target, scenario, full: run_bidi(target, scenario, full=full),
}


# --------------------------------------------------------------------------------------------
# Server overhead, the concurrency ladder, codecs


async def probe_overhead(target: Target, text: str, count: int, *, timestamps: bool = False) -> list[dict[str, float]]:
    """`speak` ``text`` ``count`` times, each in a session of its own: TTFA to the first binary
    frame, synthesis_ms, and the difference (server overhead: G2P, queue, encoding, framing,
    loopback, word events). A fresh session, because the server counts a session's audio as
    playing in real time: a probe sent while the last one's audio would still play is carried on
    from it, decoded as one window (the job sizer's rule 3), and is not a sentence spoken alone."""
    samples: list[dict[str, float]] = []
    for i in range(count):
        ws = await open_ws(target)
        try:
            if timestamps:  # the first reply is `configured` or an error
                await ws.send(json.dumps({"type": "configure", "timestamps": True}))
                reply = json.loads(await asyncio.wait_for(ws.recv(), FIRST_AUDIO_TIMEOUT_S))
                if reply["type"] != "configured":
                    raise BenchError(f"configure with timestamps got {reply}")
            sent = now()
            await ws.send(json.dumps({"type": "speak", "id": f"probe{i}", "text": text}))
            first: float | None = None
            while True:
                message = await asyncio.wait_for(ws.recv(), FIRST_AUDIO_TIMEOUT_S)
                if isinstance(message, bytes):
                    first = first if first is not None else now()
                    continue
                event = json.loads(message)
                if event.get("type") == "error":
                    raise BenchError(f"the server sent an error: {event}")
                if event.get("type") == "utterance_end":
                    if first is None:
                        raise BenchError("utterance_end without audio")
                    ttfa = (first - sent) * 1000
                    before_audio = _first_audio_ms(event)
                    samples.append({"ttfa_ms": ttfa, "synthesis_ms": float(event["synthesis_ms"]),
                                    "first_audio_synthesis_ms": before_audio, "overhead_ms": ttfa - before_audio,
                                    "audio_ms": float(event.get("audio_ms", 0))})
                    break
        finally:
            await close_ws(ws)
    return samples
