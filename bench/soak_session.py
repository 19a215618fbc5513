"""One soak session on the WebSocket, and what each of its turns must satisfy (``bench.soak`` runs
many at once): audio only inside the session's own utterances, byte counts and audio hashes that
match the reference renders, nothing after ``cancelled``, every turn ended within its timeout."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

TEXTS = ["Hello there.", "Yes, of course.", "The weather is fine.", "Good morning to you.", "Thanks a lot."]


class SoakFailure(AssertionError):
    """An invariant did not hold; the message says which and where."""


@dataclass
class SessionLog:
    number: int
    turns_done: int = 0
    utterances: int = 0
    cancels: int = 0
    audio_bytes: int = 0
    audio_verified: int = 0  # utterances whose audio hash matched the text rendered before the run
    first_audio_s: list[float] = field(default_factory=list)


class _TurnCheck:
    """What one turn's frames must satisfy: each utterance's audio is counted and hashed between its
    start and end and matched against the reference renders; nothing follows ``cancelled``."""

    def __init__(self, log: SessionLog, number: int, prefix: str, ids: list[str], texts: dict[str, str],
                 reference: dict[str, str], sent_at: float) -> None:
        self.log = log
        self.number = number
        self.prefix = prefix
        self.ids = ids
        self.texts = texts
        self.reference = reference
        self.sent_at = sent_at
        self.current: str | None = None
        self.counted = 0
        self.digest = hashlib.sha256()
        self.first_audio = True
        self.cancelled = False

    def audio(self, frame: bytes) -> bool:
        """Count and hash a binary frame; True for the turn's first (when a cancelling turn barges in)."""
        if self.cancelled:
            raise SoakFailure(f"session {self.number}: audio after cancelled")
        if self.current is None:
            raise SoakFailure(f"session {self.number}: {len(frame)} audio bytes outside any utterance")
        self.counted += len(frame)
        self.digest.update(frame)
        self.log.audio_bytes += len(frame)
        if not self.first_audio:
            return False
        self.log.first_audio_s.append(time.perf_counter() - self.sent_at)
        self.first_audio = False
        return True

    def event(self, event: dict[str, Any]) -> bool:
        """Check a JSON event; True when it ends the turn (``cancelled`` or ``turn_end``)."""
        kind = event.get("type")
        if kind == "utterance_start":
            self._start(event)
        elif kind == "utterance_end":
            self._end(event)
        elif kind == "cancelled":
            self.cancelled = True
            self.current = None
            self.log.cancels += 1
            return True
        elif kind == "turn_end":
            if self.current is not None:
                raise SoakFailure(f"session {self.number}: turn_end with {self.current!r} open")
            return True
        else:
            raise SoakFailure(f"session {self.number}: unexpected {event}")
        return False

    def _start(self, event: dict[str, Any]) -> None:
        """An utterance this session sent opens; its audio is counted from here."""
        if self.cancelled:
            raise SoakFailure(f"session {self.number}: utterance_start after cancelled: {event}")
        if not str(event["id"]).startswith(self.prefix) or event["id"] not in self.ids:
            raise SoakFailure(f"session {self.number}: foreign utterance {event['id']!r} (sent {self.ids})")
        self.current, self.counted, self.digest = event["id"], 0, hashlib.sha256()

    def _end(self, event: dict[str, Any]) -> None:
        """The open utterance closes: its byte count and audio hash must match."""
        number, current = self.number, self.current
        if event["id"] != current:
            raise SoakFailure(f"session {number}: end of {event['id']!r} while {current!r} was open")
        if event["bytes"] != self.counted:
            raise SoakFailure(f"session {number}: {event['id']} announced {event['bytes']} bytes, "
                              f"received {self.counted}")
        spoken = self.texts[event["id"]]
        if self.digest.hexdigest() != self.reference[spoken]:
            raise SoakFailure(f"session {number}: the audio of {current} ({spoken!r}) is not "
                              "that of the same text rendered alone")
        self.log.utterances += 1
        self.log.audio_verified += 1
        self.current = None


async def _turn(ws: ClientConnection, log: SessionLog, number: int, turn: int, cancel_rate: float,
                rng: random.Random, timeout: float, reference: dict[str, str]) -> None:
    """One turn: one or two utterances, flushed or (at ``cancel_rate``) cancelled once audio flows."""
    prefix = f"s{number}-"
    ids = [f"{prefix}t{turn}-u{k}" for k in range(rng.randint(1, 2))]
    texts = {uid: rng.choice(TEXTS) for uid in ids}
    cancel = rng.random() < cancel_rate
    sent_at = time.perf_counter()
    for uid in ids:
        await ws.send(json.dumps({"type": "speak", "id": uid, "text": texts[uid]}))
    if not cancel:
        await ws.send(json.dumps({"type": "flush"}))
    check = _TurnCheck(log, number, prefix, ids, texts, reference, sent_at)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SoakFailure(f"session {number} turn {turn}: no end within {timeout}s")
        frame = await asyncio.wait_for(ws.recv(), left)
        if isinstance(frame, bytes):
            if check.audio(frame) and cancel:  # barge in once audio flows
                await ws.send(json.dumps({"type": "cancel"}))
        elif check.event(json.loads(frame)):
            return


async def run_session(ws_url: str, number: int, turns: int, cancel_rate: float, rng: random.Random,
                   timeout: float, reference: dict[str, str]) -> SessionLog:
    log = SessionLog(number=number)
    async with connect(ws_url, max_size=None, open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "configure", "format": "pcm"}))
        configured = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        if configured.get("type") != "configured":
            raise SoakFailure(f"session {number}: expected configured, got {configured}")
        for turn in range(turns):
            await _turn(ws, log, number, turn, cancel_rate, rng, timeout, reference)
            log.turns_done += 1
        await ws.send(json.dumps({"type": "close"}))
    return log
