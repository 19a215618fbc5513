"""Keep hypercorn 0.18's HTTP/2 connection alive when DATA arrives for a stream it already finished.

hypercorn drops a stream once the app's response has ended; a later DATA frame from the client on
that stream (its request body was still open: the normal case for a bidirectional event stream
whose server side ended first) raises ``KeyError`` in ``H2Protocol._handle_events`` and tears down
the whole connection. hypercorn already ignores a late ``StreamEnded`` the same way; this extends
that to ``DataReceived``: the bytes are acknowledged (flow control) and dropped. Installed once by
the stand-in's server; tooling only.
"""

from __future__ import annotations

from typing import Any

import h2.events
from hypercorn.protocol.h2 import H2Protocol

_INSTALLED = "_sagemaker_local_late_data"


def install() -> None:
    if getattr(H2Protocol, _INSTALLED, False):
        return
    original = H2Protocol._handle_events

    async def handle_events(self: Any, events: list[h2.events.Event]) -> None:
        for event in events:  # one at a time: an earlier event in the batch may open the stream
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                await self._flush()
                continue
            await original(self, [event])

    H2Protocol._handle_events = handle_events  # type: ignore[method-assign]
    setattr(H2Protocol, _INSTALLED, True)
