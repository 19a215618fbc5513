"""A model of the bidirectional protocol's promises (docs/protocol.md), as a client can check them
from what it sent and what it received, in order.

Used by the stateful property test (test_session_state_machine.py); kept apart so the promises are
read in one place: every utterance ends in exactly one of ``utterance_end``, a ``cancelled``
listing it, or an ``error`` naming it; no frame of an utterance follows the ``cancelled`` that
lists it; a flushed turn gets exactly one ``turn_end`` unless a cancel of the whole turn came
after the flush (then at most one); every ``ping`` gets a ``pong`` and every ``configure`` a
``configured`` or an ``error``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

Event = dict[str, Any]  # control frames as sent; a binary frame as {"type": "audio", "bytes": n}


@dataclass
class ProtocolModel:
    """What the client sent, with the turn numbers the server must give it."""

    turn: int = 1
    speaks: dict[str, int] = field(default_factory=dict)  # id -> turn it was sent in
    flushed: dict[int, bool] = field(default_factory=dict)  # turn -> a cancel of all came after the flush
    pings: int = 0
    configures: int = 0

    def speak(self, uid: str) -> None:
        self.speaks[uid] = self.turn

    def flush(self) -> None:
        self.flushed[self.turn] = False
        self.turn += 1

    def cancel_all(self) -> None:
        for turn in self.flushed:
            self.flushed[turn] = True
        self.turn += 1


def violations(model: ProtocolModel, events: list[Event], *, settled: bool) -> list[str]:
    """The promises ``events`` break. ``settled``: everything sent has had time to be answered
    (then every request must have its answer, not merely no wrong one)."""
    found: list[str] = []
    current: str | None = None  # binary frames belong to the utterance last started
    started: set[str] = set()
    ended: Counter[str] = Counter()
    cancelled: Counter[str] = Counter()
    errored: set[str] = set()
    turn_ends: Counter[int] = Counter()
    pongs = configured = config_errors = 0
    for at, event in enumerate(events):
        kind = event["type"]
        if kind == "utterance_start":
            uid = event["id"]
            if uid in started:
                found.append(f"#{at}: utterance {uid} started twice")
            if cancelled[uid]:
                found.append(f"#{at}: utterance {uid} started after it was cancelled")
            if uid in model.speaks and event["turn"] != model.speaks[uid]:
                found.append(f"#{at}: utterance {uid} in turn {event['turn']}, sent in turn {model.speaks[uid]}")
            started.add(uid)
            current = uid
        elif kind in ("audio", "words", "utterance_end"):
            uid = current if kind == "audio" else event["id"]
            if uid is None or uid not in started:
                found.append(f"#{at}: {kind} of an utterance never started ({uid})")
            elif cancelled[uid]:
                found.append(f"#{at}: {kind} of {uid} after the cancelled that listed it")
            if kind == "utterance_end":
                ended[uid] += 1
        elif kind == "cancelled":
            for uid in event["ids"]:
                cancelled[uid] += 1
        elif kind == "turn_end":
            turn_ends[event["turn"]] += 1
            if event["turn"] not in model.flushed:
                found.append(f"#{at}: turn_end for turn {event['turn']}, never flushed")
        elif kind == "pong":
            pongs += 1
        elif kind == "configured":
            configured += 1
        elif kind == "error":
            if event.get("id") is not None:
                errored.add(event["id"])
            if event.get("field") in ("voice", "format", "sample_rate", "speed", "timestamps"):
                config_errors += 1
    for uid in set(ended) | set(cancelled):
        answers = ended[uid] + cancelled[uid]
        if answers > 1:
            found.append(f"utterance {uid}: {ended[uid]} utterance_end and in {cancelled[uid]} cancelled")
    for turn, count in turn_ends.items():
        if count > 1:
            found.append(f"turn {turn}: {count} turn_end")
    if pongs > model.pings:
        found.append(f"{pongs} pongs for {model.pings} pings")
    if not settled:
        return found
    for uid in model.speaks:
        if not (ended[uid] or cancelled[uid] or uid in errored):
            found.append(f"utterance {uid} never answered (no utterance_end, cancelled or error)")
    for uid in started:
        if not (ended[uid] or cancelled[uid] or uid in errored):
            found.append(f"utterance {uid} started and never ended or cancelled")
    for turn, cancelled_after in model.flushed.items():
        if not cancelled_after and turn_ends[turn] != 1:
            found.append(f"turn {turn} flushed, no cancel after it, {turn_ends[turn]} turn_end")
    if pongs != model.pings:
        found.append(f"{pongs} pongs for {model.pings} pings")
    if configured + config_errors < model.configures:
        found.append(f"{configured} configured and {config_errors} refusals for {model.configures} configures")
    return found
