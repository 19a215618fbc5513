"""What a session must send again on a new connection so that nothing is lost and nothing is said twice.

A server that stops (SIGTERM: a SageMaker update or scale-in) finishes the utterance it is
speaking, starts no other, says ``going_away`` and closes with 1001 (docs/protocol.md#close-codes). Everything the
client sent that got no answer is then sent again, in the order it was first sent, on a new
connection: the session's settings, each ``speak`` without its ``utterance_end`` (same id), the
turn's ``delta`` text the server had not yet spoken, each ``flush`` without its ``turn_end``, and
each ``cancel`` and ``ping`` not yet answered. What was answered is never sent again, so no
sentence that ended is spoken twice. (A connection that breaks without ``going_away``, a crash,
is not resumed: an utterance may have been half heard.)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from voicestream.protocol import Cancel, Configure, Delta, Flush, Ping, Speak

from .events import Cancelled, Configured, ErrorEvent, Pong, TtsEvent, TurnEnd, UtteranceEnd, UtteranceStart

Message = Configure | Speak | Delta | Flush | Cancel | Ping


@dataclass
class _DeltaText:
    """A turn's ``delta`` text the server has not spoken yet (sentences it ended are cut off)."""

    text: str


Entry = Speak | Flush | Cancel | Ping | _DeltaText


class ResumeLog:
    """Every message sent and not yet answered, in order; :meth:`replay` lists what to send again."""

    def __init__(self) -> None:
        self._settings = Configure()
        self._configures = 0  # sent, not answered yet
        self._entries: list[Entry] = []
        self._server_text: dict[str, str] = {}  # utterance id -> text, for utterances the server cut
        self.swallow_configured = 0  # answers to a replayed configure nobody asked for

    def outstanding(self) -> bool:
        """Something sent is still waiting for its answer."""
        return bool(self._entries) or self._configures > 0

    def sent(self, message: Message) -> None:
        if isinstance(message, Configure):
            changes = {f.name: getattr(message, f.name) for f in fields(message)
                       if getattr(message, f.name) is not None}
            self._settings = replace(self._settings, **changes)
            self._configures += 1
        elif isinstance(message, Delta):
            last = self._entries[-1] if self._entries else None
            if isinstance(last, _DeltaText):
                last.text += message.text
            else:
                self._entries.append(_DeltaText(message.text))
        elif isinstance(message, Cancel):
            if message.ids is None:  # everything open is dropped: nothing of it is sent again
                self._entries = [e for e in self._entries if isinstance(e, (Cancel, Ping))]
            else:
                self._entries = [e for e in self._entries if not (isinstance(e, Speak) and e.id in message.ids)]
            self._entries.append(message)
        else:
            self._entries.append(message)

    def received(self, event: TtsEvent) -> None:
        if isinstance(event, UtteranceStart) and not self._has_speak(event.id):
            self._server_text[event.id] = event.text  # cut by the server from our deltas
        elif isinstance(event, UtteranceEnd):
            self._answered_speak(event.id)
            self._spoken_delta(self._server_text.pop(event.id, None))
        elif isinstance(event, ErrorEvent):
            if event.id is not None:
                self._answered_speak(event.id)
            elif event.field in ("voice", "speed", "format", "sample_rate", "timestamps", "lang"):
                self._configures = max(0, self._configures - 1)
        elif isinstance(event, TurnEnd):
            self._remove_first(Flush)
        elif isinstance(event, Cancelled):
            self._remove_first(Cancel)
        elif isinstance(event, Pong):
            self._remove_first(Ping)
        elif isinstance(event, Configured):
            self._configures = max(0, self._configures - 1)

    def replay(self) -> list[Message]:
        """What to send on a new connection, in order (the settings first)."""
        messages: list[Message] = []
        if self._settings != Configure():
            messages.append(self._settings)
            if self._configures == 0:
                self.swallow_configured += 1  # its answer is not one the caller waits for
            self._configures = min(self._configures, 1)
        for entry in self._entries:
            if isinstance(entry, _DeltaText):
                if entry.text:
                    messages.append(Delta(text=entry.text))
            else:
                messages.append(entry)
        self._server_text.clear()
        return messages

    def _has_speak(self, uid: str) -> bool:
        return any(isinstance(e, Speak) and e.id == uid for e in self._entries)

    def _answered_speak(self, uid: str) -> None:
        self._entries = [e for e in self._entries if not (isinstance(e, Speak) and e.id == uid)]

    def _remove_first(self, kind: type[Flush] | type[Cancel] | type[Ping]) -> None:
        for at, entry in enumerate(self._entries):
            if isinstance(entry, kind):
                del self._entries[at]
                if kind is Flush:  # a turn's deltas end with its flush
                    kept: list[Entry] = [e for e in self._entries[:at] if not isinstance(e, _DeltaText)]
                    self._entries = kept + self._entries[at:]
                return

    def _spoken_delta(self, sentence: str | None) -> None:
        """The server spoke ``sentence``, cut from the earliest delta text: drop it from there."""
        if not sentence:
            return
        for entry in self._entries:
            if isinstance(entry, _DeltaText):
                at = entry.text.find(sentence)
                if at >= 0:
                    entry.text = entry.text[at + len(sentence):]
                return
