"""The errors every TTS client raises, whatever its transport, so callers catch one family."""

from __future__ import annotations

import json
from typing import Any


class TtsError(Exception):
    """Base of every client error."""


class TtsServerError(TtsError):
    """The server (or the endpoint in front of it) refused a request; ``message`` is its own words."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        id: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if code and not message.startswith(code) else message)
        self.code = code
        self.message = message
        self.field = field
        self.id = id
        self.status = status

    @classmethod
    def from_frame(cls, frame: dict[str, Any], *, status: int | None = None) -> TtsServerError:
        """Build from a protocol ``error`` frame or the ``error`` object of a 4xx body."""
        field = frame.get("field")
        uid = frame.get("id")
        return cls(
            str(frame.get("code") or "error"),
            str(frame.get("message") or "no message"),
            field=field if isinstance(field, str) else None,
            id=uid if isinstance(uid, str) else None,
            status=status,
        )

    @classmethod
    def from_body(cls, body: bytes | str, *, status: int | None = None) -> TtsServerError:
        """Build from an HTTP error body: ``{"error": {...}}`` when it is ours, else its text."""
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            payload = None
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            return cls.from_frame(payload["error"], status=status)
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return cls(f"http_{status}" if status else "error", text.strip()[:500] or "no message", status=status)


class TtsConnectionError(TtsError):
    """The connection could not be made or was lost; the session is unusable. ``code``: the
    WebSocket close code the server sent, when one arrived."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TtsTimeoutError(TtsConnectionError):
    """Nothing arrived within the receive timeout: treat the peer as gone rather than hang."""


class TtsProtocolError(TtsError):
    """The server sent something the protocol does not allow (e.g. a control frame that is not JSON)."""


class TtsConfigError(TtsError):
    """The client cannot start: no region, no credentials, or a missing optional package."""
