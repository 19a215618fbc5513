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


@dataclass
class _Heard:
    """What the server's frames said so far, tallied the way the promises are stated."""

    current: str | None = None  # binary frames belong to the utterance last started
    started: set[str] = field(default_factory=set)
    ended: Counter[str] = field(default_factory=Counter)
    cancelled: Counter[str] = field(default_factory=Counter)
    errored: set[str] = field(default_factory=set)
    turn_ends: Counter[int] = field(default_factory=Counter)
    pongs: int = 0
    configured: int = 0
    config_errors: int = 0


def violations(model: ProtocolModel, events: list[Event], *, settled: bool) -> list[str]:
    """The promises ``events`` break. ``settled``: everything sent has had time to be answered
    (then every request must have its answer, not merely no wrong one)."""
    found: list[str] = []
    heard = _Heard()
    for at, event in enumerate(events):
        found += _heard(model, heard, at, event)
    found += _answered_twice(model, heard)
    if not settled:
        return found
    return found + _unanswered(model, heard)


def _heard(model: ProtocolModel, heard: _Heard, at: int, event: Event) -> list[str]:
    """Tally one frame; the promises it breaks the moment it arrives."""
    kind = event["type"]
    if kind == "utterance_start":
        return _utterance_start(model, heard, at, event)
    if kind in ("audio", "words", "utterance_end"):
        return _utterance_frame(heard, at, event)
    if kind == "turn_end":
        return _turn_end(model, heard, at, event)
    if kind == "cancelled":
        for uid in event["ids"]:
            heard.cancelled[uid] += 1
    elif kind == "pong":
        heard.pongs += 1
    elif kind == "configured":
        heard.configured += 1
    elif kind == "error":
        _error(heard, event)
    return []


def _utterance_start(model: ProtocolModel, heard: _Heard, at: int, event: Event) -> list[str]:
    """An utterance starts once, never after its cancel, in the turn its speak was sent in."""
    found: list[str] = []
    uid = event["id"]
    if uid in heard.started:
        found.append(f"#{at}: utterance {uid} started twice")
    if heard.cancelled[uid]:
        found.append(f"#{at}: utterance {uid} started after it was cancelled")
    if uid in model.speaks and event["turn"] != model.speaks[uid]:
        found.append(f"#{at}: utterance {uid} in turn {event['turn']}, sent in turn {model.speaks[uid]}")
    heard.started.add(uid)
    heard.current = uid
    return found


def _utterance_frame(heard: _Heard, at: int, event: Event) -> list[str]:
    """Audio, words and utterance_end belong to a started utterance not yet cancelled."""
    found: list[str] = []
    kind = event["type"]
    uid = heard.current if kind == "audio" else event["id"]
    if uid is None or uid not in heard.started:
        found.append(f"#{at}: {kind} of an utterance never started ({uid})")
    elif heard.cancelled[uid]:
        found.append(f"#{at}: {kind} of {uid} after the cancelled that listed it")
    if kind == "utterance_end":
        heard.ended[event["id"]] += 1
    return found


def _turn_end(model: ProtocolModel, heard: _Heard, at: int, event: Event) -> list[str]:
    """A turn_end only for a turn that was flushed."""
    heard.turn_ends[event["turn"]] += 1
    if event["turn"] not in model.flushed:
        return [f"#{at}: turn_end for turn {event['turn']}, never flushed"]
    return []


def _error(heard: _Heard, event: Event) -> None:
    """An error naming an utterance answers it; one naming a configure field answers a configure."""
    if event.get("id") is not None:
        heard.errored.add(event["id"])
    if event.get("field") in ("voice", "format", "sample_rate", "speed", "timestamps"):
        heard.config_errors += 1


def _answered_twice(model: ProtocolModel, heard: _Heard) -> list[str]:
    """Answers given more than once (or to requests never made): wrong whenever they are seen."""
    found: list[str] = []
    ended, cancelled = heard.ended, heard.cancelled
    for uid in set(ended) | set(cancelled):
        answers = ended[uid] + cancelled[uid]
        if answers > 1:
            found.append(f"utterance {uid}: {ended[uid]} utterance_end and in {cancelled[uid]} cancelled")
    for turn, count in heard.turn_ends.items():
        if count > 1:
            found.append(f"turn {turn}: {count} turn_end")
    if heard.pongs > model.pings:
        found.append(f"{heard.pongs} pongs for {model.pings} pings")
    return found


def _unanswered(model: ProtocolModel, heard: _Heard) -> list[str]:
    """Requests still without their answer once everything has had time to be answered."""
    found: list[str] = []
    for uid in model.speaks:
        if not _utterance_answered(heard, uid):
            found.append(f"utterance {uid} never answered (no utterance_end, cancelled or error)")
    for uid in heard.started:
        if not _utterance_answered(heard, uid):
            found.append(f"utterance {uid} started and never ended or cancelled")
    for turn, cancelled_after in model.flushed.items():
        if not cancelled_after and heard.turn_ends[turn] != 1:
            found.append(f"turn {turn} flushed, no cancel after it, {heard.turn_ends[turn]} turn_end")
    if heard.pongs != model.pings:
        found.append(f"{heard.pongs} pongs for {model.pings} pings")
    configured, refusals = heard.configured, heard.config_errors
    if configured + refusals < model.configures:
        found.append(f"{configured} configured and {refusals} refusals for {model.configures} configures")
    return found


def _utterance_answered(heard: _Heard, uid: str) -> bool:
    return bool(heard.ended[uid] or heard.cancelled[uid] or uid in heard.errored)
