"""Liveness as a state machine: random interleavings of every client message against one real
server session, checked against the protocol's promises (protocol_model.py) after every step.

Each example is one WebSocket session on the shared tiny-model server. Steps send speak, delta,
flush, cancel (of everything, by id, of an unknown id), configure (format, voice, a blend),
ping, and waits: of random length, or until the next ``utterance_start`` or audio frame so the
next message lands just after the answer begins, between windows, or while a chunk is encoded.
At the end the session must still answer a new speak and flush within ANSWER_S, and every
request sent must have had its answer.

``make test`` runs a fixed, derandomized set of examples (CI is deterministic); ``make liveness``
explores (KOKORO_LIVENESS_EXAMPLES examples, new ones each run).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from kokoro_harness import Server
from protocol_model import Event, ProtocolModel, violations
from websockets.sync.client import connect

pytestmark = pytest.mark.kokoro

ANSWER_S = 30.0  # a request unanswered this long is never answered: the tiny model speaks in ms
EXPLORE = int(os.environ.get("KOKORO_LIVENESS_EXAMPLES", "0"))
SENTENCES = [
    "Okay.", "Sure, here is what I found.", "The weather is fine today, with a light breeze from the west.",
    "Let me check that for you. It takes a moment.",
]
DELTAS = ["Sure", ", here", " it is. The", " next part", " comes now. And", " then", ""]
FORMATS = ["pcm", "wav", "mp3", "opus", "aac", "flac"]
VOICES = ["af_heart", "am_michael", "af_heart(2)+am_michael(1)"]


class Session:
    """One connection; a thread receives every frame in order while steps send."""

    def __init__(self, url: str) -> None:
        self.ws = connect(url, max_size=None, open_timeout=10)
        self.events: list[Event] = []
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                frame = self.ws.recv()
                event = {"type": "audio", "bytes": len(frame)} if isinstance(frame, bytes) else json.loads(frame)
                with self._arrived:
                    self.events.append(event)
                    self._arrived.notify_all()
        except Exception:  # the connection ended: the checks say whether it should have
            pass

    def send(self, message: dict[str, Any]) -> None:
        self.ws.send(json.dumps(message))

    def wait_for(self, kind: str, *, after: int, timeout: float) -> bool:
        """Until an event of ``kind`` arrives past index ``after`` (bounded)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not any(e["type"] == kind for e in self.events[after:]):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._arrived.wait(left)
        return True

    def snapshot(self) -> list[Event]:
        with self._arrived:
            return list(self.events)

    def close(self) -> None:
        self.ws.close()
        self._reader.join(timeout=10)


class ProtocolSession(RuleBasedStateMachine):
    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.model = ProtocolModel()
        self.session: Session | None = None
        self.ids = itertools.count(1)
        self.sent_ids: list[str] = []

    @initialize()
    def open(self) -> None:
        self.session = Session(self.url)

    @property
    def live(self) -> Session:
        assert self.session is not None
        return self.session

    @rule(text=st.sampled_from(SENTENCES))
    def speak(self, text: str) -> None:
        uid = f"s{next(self.ids)}"
        self.model.speak(uid)
        self.sent_ids.append(uid)
        self.live.send({"type": "speak", "id": uid, "text": text})

    @rule(text=st.sampled_from(DELTAS))
    def delta(self, text: str) -> None:
        self.live.send({"type": "delta", "text": text})

    @rule()
    def flush(self) -> None:
        self.model.flush()
        self.live.send({"type": "flush"})

    @rule()
    def cancel(self) -> None:
        self.model.cancel_all()
        self.live.send({"type": "cancel"})

    @precondition(lambda self: bool(self.sent_ids))
    @rule(data=st.data())
    def cancel_by_id(self, data: st.DataObject) -> None:
        ids = data.draw(st.lists(st.sampled_from(self.sent_ids), min_size=1, max_size=3))
        self.live.send({"type": "cancel", "ids": ids})

    @rule()
    def cancel_unknown_id(self) -> None:
        self.live.send({"type": "cancel", "ids": ["never-sent"]})

    @rule(fmt=st.sampled_from(FORMATS), voice=st.sampled_from([None, *VOICES]))
    def configure(self, fmt: str, voice: str | None) -> None:
        self.model.configures += 1
        message: dict[str, Any] = {"type": "configure", "format": fmt}
        if voice is not None:
            message["voice"] = voice
        self.live.send(message)

    @rule()
    def ping(self) -> None:
        self.model.pings += 1
        self.live.send({"type": "ping"})

    @rule(ms=st.sampled_from([0, 1, 5, 20, 80, 250]))
    def wait(self, ms: int) -> None:
        time.sleep(ms / 1000)

    @rule(kind=st.sampled_from(["utterance_start", "audio", "utterance_end"]))
    def wait_for_next(self, kind: str) -> None:
        """The next message goes out right after this arrives (or after 1 s of nothing)."""
        self.live.wait_for(kind, after=len(self.live.snapshot()), timeout=1.0)

    @invariant()
    def promises_kept_so_far(self) -> None:
        if self.session is not None:
            broken = violations(self.model, self.live.snapshot(), settled=False)
            assert not broken, broken

    def teardown(self) -> None:
        if self.session is None:
            return
        try:
            # Still speaking: a new speak and flush are answered within the bound.
            uid = f"last{next(self.ids)}"
            self.model.speak(uid)
            turn = self.model.turn
            self.model.flush()
            self.live.send({"type": "speak", "id": uid, "text": "Okay."})
            self.live.send({"type": "flush"})
            deadline = time.monotonic() + ANSWER_S
            while time.monotonic() < deadline:
                events = self.live.snapshot()
                if any(e["type"] == "turn_end" and e["turn"] == turn for e in events) and not violations(
                    self.model, events, settled=True
                ):
                    break
                self.live.wait_for("turn_end", after=len(events), timeout=0.5)
            events = self.live.snapshot()
            assert any(e["type"] == "utterance_end" and e["id"] == uid for e in events), events[-8:]
            broken = violations(self.model, events, settled=True)
            assert not broken, (broken, events[-12:])
        finally:
            self.live.close()


@pytest.fixture()
def machine(server: Server) -> type[ProtocolSession]:
    ProtocolSession.url = server.ws
    return ProtocolSession


EXAMPLES = settings(
    max_examples=EXPLORE or 12, stateful_step_count=20, deadline=None, derandomize=not EXPLORE,
    database=None, suppress_health_check=list(HealthCheck), print_blob=True,
)


def test_every_interleaving_of_client_messages_is_answered(machine: type[ProtocolSession], server: Server) -> None:
    run_state_machine_as_test(machine, settings=EXAMPLES)
    status = server.wait_idle()
    assert (status["sessions"], status["queued"], status["running"]) == (0, 0, 0), status
