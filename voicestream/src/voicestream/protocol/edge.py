"""One connection's edge: client frames in as typed messages, typed events out as frames, with the
AWS sample's shape (see protocol.aws) translated here and nowhere else."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

from .aws import sample_frame
from .events import Cancelled, ErrorEvent, ServerEvent, UtteranceEnd, UtteranceStart
from .messages import ClientMessage, Speak
from .wire import parse_client_message


class ServerEdge:
    """The server side of one connection: parses client frames, encodes server events.

    A sample-shape request without ``request_id`` gets one here (``request-<n>``), so its answers
    can be matched to it.
    """

    def __init__(self) -> None:
        self._sample_ids: set[str] = set()
        self._numbers = itertools.count(1)

    def parse(self, raw: bytes | str) -> ClientMessage:
        message = parse_client_message(raw)
        if isinstance(message, Speak) and message.legacy:
            if message.id is None:
                message = replace(message, id=f"request-{next(self._numbers)}")
            self._sample_ids.add(message.id)  # type: ignore[arg-type]
        return message

    def encode(self, event: ServerEvent) -> str:
        frame = self.frame(event)
        return json.dumps(frame)

    def frame(self, event: ServerEvent) -> dict[str, Any]:
        if isinstance(event, (UtteranceStart, UtteranceEnd)) and event.id in self._sample_ids:
            if isinstance(event, UtteranceEnd):
                self._sample_ids.discard(event.id)
            return sample_frame(event)
        if isinstance(event, Cancelled):
            self._sample_ids.difference_update(event.ids)
        elif isinstance(event, ErrorEvent) and event.code == "synthesis_failed" and event.id:
            self._sample_ids.discard(event.id)
        return event.to_wire()
