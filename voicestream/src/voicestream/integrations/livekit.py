"""LiveKit Agents TTS over the bidirectional protocol (``pip install 'voicestream[livekit]'``).

::

    from voicestream.integrations.livekit import KokoroTTS

    session = AgentSession(stt=..., llm=..., tts=KokoroTTS(url="http://127.0.0.1:8080", voice="af_heart"))
    # or a SageMaker endpoint: KokoroTTS(endpoint_name="kokoro-tts", region="us-east-1")
    # (endpoint_url=, ca_bundle=, aws_access_key_id= ... for a stand-in or other credentials)

Each answer (one ``SynthesizeStream``) is one turn on one session: the LLM's text is cut by the
project's chunker as it arrives (the first clause once it has five words, then whole sentences) and
each piece is sent as ``speak`` at once, so the server synthesizes piece N+1 while piece N plays.
``speak`` rather than ``delta``: the pieces and their text are ours, so the words' character offsets
index text we hold, and the early first fragment is the client's choice. Audio frames are pushed as
they arrive; each sentence's word times become LiveKit ``TimedString``s (aligned transcripts).
Closing the stream early (an interruption) sends ``cancel``; the session then goes back to a small
pool for the next answer, as does one that finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    APIConnectionError,
    APIConnectOptions,
    APIError,
    APITimeoutError,
    tts,
    utils,
)
from livekit.agents.types import NOT_GIVEN, NotGivenOr, TimedString

from voicestream.clients import (
    AudioChunk,
    TtsConnectionError,
    TtsError,
    TtsServerError,
    TtsSession,
    TtsTimeoutError,
    TurnEnd,
    UtteranceStart,
)
from voicestream.protocol import NATIVE_SAMPLE_RATE, SAMPLE_WIDTH, Words

from ._common import (
    KokoroTarget,
    PieceCutter,
    SessionPool,
    check_sample_rate,
    open_session,
    word_spans,
)

__all__ = ["KokoroTTS", "KokoroSynthesizeStream"]

log = logging.getLogger(__name__)


@dataclass
class _Options:
    voice: str | None
    speed: float | None


def _api_error(exc: TtsError) -> APIError:
    if isinstance(exc, TtsTimeoutError):
        return APITimeoutError(str(exc))
    if isinstance(exc, TtsConnectionError):
        return APIConnectionError(str(exc))
    retryable = isinstance(exc, TtsServerError) and exc.code in ("busy", "queue_full")
    return APIError(str(exc), body=getattr(exc, "code", None), retryable=retryable)


class KokoroTTS(tts.TTS[Literal["metrics_collected", "error"]]):
    """Kokoro through voicestream's bidirectional stream: streaming, with aligned transcripts.

    ``url``: a server's base URL (``http://127.0.0.1:8080``); or ``endpoint_name`` for a SageMaker
    endpoint, with its options (``region``, ``endpoint_url``, ``ca_bundle``, credentials:
    ``_common.KokoroTarget``; docs/integrations.md). ``voice``: any Kokoro voice or blend (``af_bella(2)+af_sky(1)``);
    None: the server's default. ``speed``: 0.5-2.0. ``sample_rate``: pcm the server encodes at (8000,
    16000, 22050, 24000, 44100 or 48000; Kokoro's own is 24000). ``lang``: the language text is read
    in, one of Kokoro's codes (``j`` Japanese...); None: the voice's own (``jf_alpha`` reads Japanese).
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        endpoint_name: str | None = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        ca_bundle: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        profile_name: str | None = None,
        boto_session: Any | None = None,
        voice: str | None = None,
        speed: float | None = None,
        sample_rate: int = NATIVE_SAMPLE_RATE,
        connect_timeout: float = 10.0,
        lang: str | None = None,
    ) -> None:
        super().__init__(capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
                         sample_rate=check_sample_rate(sample_rate), num_channels=1)
        self._target = KokoroTarget(
            url=url, endpoint_name=endpoint_name, region=region, endpoint_url=endpoint_url, ca_bundle=ca_bundle,
            aws_access_key_id=aws_access_key_id, aws_secret_access_key=aws_secret_access_key,
            aws_session_token=aws_session_token, profile_name=profile_name, boto_session=boto_session)
        self._opts = _Options(voice=voice, speed=speed)
        self._connect_timeout = connect_timeout
        self._lang = lang  # Kokoro's language code (voicestream.protocol.LANGUAGES); None: the voice's
        self._pool = SessionPool(self._open)
        self._prewarming: asyncio.Task[None] | None = None

    @property
    def model(self) -> str:
        return "kokoro-82m"

    @property
    def provider(self) -> str:
        return "voicestream"

    async def _open(self) -> TtsSession:
        return await open_session(self._target, voice=self._opts.voice, speed=self._opts.speed,
                                  sample_rate=self.sample_rate, timeout=self._connect_timeout, lang=self._lang)

    def update_options(self, *, voice: NotGivenOr[str] = NOT_GIVEN, speed: NotGivenOr[float] = NOT_GIVEN) -> None:
        """Applies from the next piece sent (every ``speak`` names the voice and speed)."""
        if utils.is_given(voice):
            self._opts.voice = voice
        if utils.is_given(speed):
            self._opts.speed = speed

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        """One-shot text, over the same stream (one turn)."""
        stream: tts.ChunkedStream = self._synthesize_with_stream(text, conn_options=conn_options)
        return stream

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> KokoroSynthesizeStream:
        return KokoroSynthesizeStream(tts=self, conn_options=conn_options)

    def prewarm(self) -> None:
        """Open a session now, so the first answer does not wait for the connection."""
        if self._prewarming is None or self._prewarming.done():
            self._prewarming = asyncio.create_task(self._prewarm())

    async def _prewarm(self) -> None:
        try:
            await self._pool.prewarm()
        except (TtsError, OSError, TimeoutError) as exc:
            log.warning("prewarming a Kokoro session failed: %s", exc)

    async def aclose(self) -> None:
        if self._prewarming is not None:
            await utils.aio.cancel_and_wait(self._prewarming)
        await self._pool.aclose()


class KokoroSynthesizeStream(tts.SynthesizeStream):
    """One answer as one turn of a session; see the module's docstring."""

    def __init__(self, *, tts: KokoroTTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._kokoro = tts

    async def _pieces(self) -> AsyncIterator[str]:
        cutter = PieceCutter()
        async for data in self._input_ch:
            pieces = cutter.flush() if isinstance(data, self._FlushSentinel) else cutter.feed(data)
            for piece in pieces:
                self._mark_started()
                yield piece
        for piece in cutter.flush():
            self._mark_started()
            yield piece

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        request_id = utils.shortuuid()
        rate = self._kokoro.sample_rate
        output_emitter.initialize(request_id=request_id, sample_rate=rate, num_channels=1,
                                  mime_type="audio/pcm", stream=True)
        output_emitter.start_segment(segment_id=request_id)
        pool = self._kokoro._pool
        try:
            session = await asyncio.wait_for(pool.acquire(), self._conn_options.timeout)
        except TimeoutError:
            raise APITimeoutError("connecting to the Kokoro server timed out") from None
        except TtsError as exc:
            raise _api_error(exc) from exc
        reusable = False  # the turn ended, or was cancelled and its leftovers will be skipped
        try:
            pushed_bytes, base = 0, 0.0
            texts: dict[str, str] = {}
            opts = self._kokoro._opts
            events = session.speak_stream(self._pieces(), voice=opts.voice, speed=opts.speed)
            async with contextlib.aclosing(events):  # leaving early sends cancel (speak_stream)
                async for event in events:
                    if isinstance(event, AudioChunk):
                        pushed_bytes += len(event.data)
                        output_emitter.push(event.data)
                    elif isinstance(event, UtteranceStart):
                        texts[event.id] = event.text
                        base = pushed_bytes / (SAMPLE_WIDTH * rate)  # this piece's audio starts here
                    elif isinstance(event, Words):
                        output_emitter.push_timed_transcript(_timed(texts.get(event.id, ""), event, base))
                    elif isinstance(event, TurnEnd):
                        break
            reusable = True
        except asyncio.CancelledError:  # interrupted (aclose): speak_stream has sent cancel
            reusable = not session.closed
            raise
        except TtsError as exc:
            raise _api_error(exc) from exc
        finally:
            await _give_back(pool, session, reusable)
        output_emitter.end_segment()


def _timed(text: str, words: Words, base: float) -> list[TimedString]:
    """The piece's words as transcript pieces (joined: the piece, then a space), times in seconds
    from the start of this answer's audio."""
    spans = list(word_spans(text, words.words))
    return [TimedString(span + (" " if i == len(spans) - 1 and not span[-1:].isspace() else ""),
                        start_time=base + word.start_ms / 1000, end_time=base + word.end_ms / 1000)
            for i, (span, word) in enumerate(spans)]


async def _give_back(pool: SessionPool, session: TtsSession, reusable: bool) -> None:
    """Back to the pool when the turn ended or was cancelled cleanly; else closed."""
    with contextlib.suppress(Exception):
        if reusable:
            await pool.release(session)
        else:
            await session.close()
