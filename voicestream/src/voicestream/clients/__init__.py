"""TTS clients: one bidirectional session (:class:`TtsSession`) and one one-shot interface
(:class:`StreamingTts`), each over thin transports.

Transports import their libraries lazily, so ``from voicestream.clients import connect_local``
does not need boto3 or the SageMaker HTTP/2 SDK (which needs Python 3.12).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .base import FrameTransport, StreamingTts, TtsSession
from .errors import (
    TtsConfigError,
    TtsConnectionError,
    TtsError,
    TtsProtocolError,
    TtsServerError,
    TtsTimeoutError,
)
from .events import (
    AudioChunk,
    Cancelled,
    Configured,
    ErrorEvent,
    Pong,
    TtsEvent,
    TurnEnd,
    UtteranceEnd,
    UtteranceStart,
)

if TYPE_CHECKING:
    from .local import LocalHttpTts, WebSocketTransport, connect_local
    from .sagemaker import SageMakerStreamingTts
    from .sagemaker_bidi import BotoCredentialsResolver, SageMakerBidiTransport, connect_sagemaker

_LAZY = {
    "connect_local": "local", "LocalHttpTts": "local", "WebSocketTransport": "local",
    "SageMakerStreamingTts": "sagemaker",
    "connect_sagemaker": "sagemaker_bidi", "SageMakerBidiTransport": "sagemaker_bidi",
    "BotoCredentialsResolver": "sagemaker_bidi",
}

__all__ = [
    "AudioChunk", "BotoCredentialsResolver", "Cancelled", "Configured", "ErrorEvent", "FrameTransport",
    "LocalHttpTts", "Pong", "SageMakerBidiTransport", "SageMakerStreamingTts", "StreamingTts",
    "TtsConfigError", "TtsConnectionError", "TtsError", "TtsEvent", "TtsProtocolError", "TtsServerError",
    "TtsSession", "TtsTimeoutError", "TurnEnd", "UtteranceEnd", "UtteranceStart", "WebSocketTransport",
    "connect_local", "connect_sagemaker",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
