"""One connection's edge: client frames in as typed messages, typed events out as frames, with the
AWS sample's shape (see protocol.aws) translated here and nowhere else."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import replace
from typing import Any

from .aws import SampleSpeak, is_sample_request, sample_error, sample_frame
from .events import Cancelled, ErrorEvent, ServerEvent, UtteranceEnd, UtteranceStart
from .fields import MAX_FRAME_BYTES, ProtocolError, load_object
from .messages import ClientMessage
from .wire import parse_client_message


class ServerEdge:
    """The server side of one connection: parses client frames, encodes server events.

    A sample-shape request without ``request_id`` gets one here (``request-<n>``), so its answers
    (and a refusal of it) can be matched to it; ``elapsed_s`` counts from when it arrived.
    """

    def __init__(self) -> None:
        self._sample_ids: dict[str, float] = {}  # id -> when its request arrived (monotonic s)
        self._numbers = itertools.count(1)

    def parse(self, raw: bytes | str) -> ClientMessage:
        try:
            message = parse_client_message(raw)
        except ProtocolError as exc:
            if _sample_shaped(raw):  # the refusal goes back in the sample's shape, with its id
                exc.id = exc.id or f"request-{next(self._numbers)}"
                self._sample_ids.setdefault(exc.id, time.monotonic())
            raise
        if isinstance(message, SampleSpeak):
            if message.id is None:
                message = replace(message, id=f"request-{next(self._numbers)}")
            self._sample_ids.setdefault(message.id, time.monotonic())  # type: ignore[arg-type]
        return message

    def encode(self, event: ServerEvent) -> str:
        frame = self.frame(event)
        return json.dumps(frame)

    def frame(self, event: ServerEvent) -> dict[str, Any]:
        if isinstance(event, (UtteranceStart, UtteranceEnd)) and event.id in self._sample_ids:
            if isinstance(event, UtteranceEnd):
                arrived = self._sample_ids.pop(event.id)
                return sample_frame(event, elapsed_s=time.monotonic() - arrived)
            return sample_frame(event)
        if isinstance(event, Cancelled):
            for uid in event.ids:
                self._sample_ids.pop(uid, None)
        elif isinstance(event, ErrorEvent) and event.id in self._sample_ids:
            if event.code != "duplicate_id":  # the request of that id is still being spoken
                self._sample_ids.pop(event.id)
            return sample_error(event)
        return event.to_wire()


def _sample_shaped(raw: bytes | str) -> bool:
    if len(raw) > MAX_FRAME_BYTES:
        return False
    try:
        return is_sample_request(load_object(raw))
    except ProtocolError:
        return False
