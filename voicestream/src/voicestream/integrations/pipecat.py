"""A pipecat TTS service over the bidirectional protocol (``pip install 'voicestream[pipecat]'``).

::

    from voicestream.integrations.pipecat import KokoroTTSService

    tts = KokoroTTSService(url="http://127.0.0.1:8080", voice="af_bella(2)+af_sky(1)")
    # or a SageMaker endpoint: KokoroTTSService(endpoint_name="kokoro-tts", region="us-east-1")
    # (endpoint_url=, ca_bundle=, aws_access_key_id= ... for a stand-in or other credentials)
    pipeline = Pipeline([transport.input(), stt, user_agg, llm, tts, transport.output(), assistant_agg])

One session for the service's life. The LLM's tokens reach ``run_tts`` as they come (pipecat's
``TextAggregationMode.TOKEN``), the project's chunker cuts them (the first clause of an answer once it
has five words, then sentences) and each piece goes out as ``speak`` with an id naming its pipecat
context, so audio, word times and ends are routed back to the context they belong to. Word times
are pushed with ``add_word_timestamps`` (pipecat's ``TTSTextFrame``s, timed to the audio). An
interruption cancels the context's pieces still open (``cancel`` with their ids); a context ends
(``TTSStoppedFrame``) when its turn was flushed and its last piece ended, and not before: pipecat
ends a context that gets nothing for ``stop_frame_timeout_s`` (3 s) and drops what comes later,
while a busy server may take longer than that for a first audio or the next sentence, so the
service keeps each of its contexts alive (pipecat's own keepalive) until the server ended it or
it was interrupted. pipecat 1.14 folds word
timestamps into ``TTSService`` itself (``WordTTSService`` is deprecated), so that is the base; its
``Websocket*`` bases assume a ``websockets`` connection, which a SageMaker stream is not.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TextAggregationMode, TTSService

from voicestream.clients import (
    AudioChunk,
    Cancelled,
    ErrorEvent,
    TtsError,
    TtsEvent,
    TtsSession,
    UtteranceEnd,
    UtteranceStart,
)
from voicestream.protocol import SAMPLE_WIDTH, Words

from ._common import KokoroTarget, PieceCutter, check_sample_rate, open_session, word_spans

__all__ = ["KokoroTTSService"]

PIPECAT_STOP_FRAME_TIMEOUT_S = 3.0  # TTSService's default for stop_frame_timeout_s


@dataclass
class _Context:
    """One pipecat audio context: its pieces still open and how much audio it has had."""

    cutter: PieceCutter = field(default_factory=PieceCutter)
    open: set[str] = field(default_factory=set)
    pieces: int = 0
    flushed: bool = False
    audio_bytes: int = 0
    base_s: float = 0.0  # where the piece being spoken starts in the context's audio


class KokoroTTSService(TTSService):
    """Kokoro through voicestream's bidirectional stream; see the module's docstring.

    ``url`` (a server's base URL) or ``endpoint_name`` for a SageMaker endpoint, with its options
    (``region``, ``endpoint_url``, ``ca_bundle``, credentials; else boto3's: ``_common.KokoroTarget``,
    docs/integrations.md). ``voice``: any Kokoro voice or blend; None: the server's
    default. ``speed``: 0.5-2.0. ``sample_rate``: None takes the pipeline's output rate; the server
    encodes pcm at 8000, 16000, 22050, 24000, 44100 or 48000. ``lang``: the language text is read
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
        sample_rate: int | None = None,
        connect_timeout: float = 10.0,
        text_aggregation_mode: TextAggregationMode = TextAggregationMode.TOKEN,
        lang: str | None = None,
        **kwargs: Any,
    ) -> None:
        if sample_rate is not None:
            check_sample_rate(sample_rate)
        super().__init__(
            text_aggregation_mode=text_aggregation_mode,
            push_text_frames=False,  # TTSTextFrames come from the word times, as the audio plays
            push_start_frame=True,
            sample_rate=sample_rate,
            settings=TTSSettings(model="kokoro-82m", voice=voice, language=None),
            **kwargs,
        )
        self._target = KokoroTarget(
            url=url, endpoint_name=endpoint_name, region=region, endpoint_url=endpoint_url, ca_bundle=ca_bundle,
            aws_access_key_id=aws_access_key_id, aws_secret_access_key=aws_secret_access_key,
            aws_session_token=aws_session_token, profile_name=profile_name, boto_session=boto_session)
        self._speed = speed
        self._lang = lang  # Kokoro's language code (voicestream.protocol.LANGUAGES); None: the voice's
        self._connect_timeout = connect_timeout
        self._session: TtsSession | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._contexts: dict[str, _Context] = {}
        self._owner: dict[str, str] = {}  # piece id -> context id
        self._texts: dict[str, str] = {}  # piece id -> its text (word offsets index it)
        # Refresh open contexts well inside pipecat's wait for their next item.
        self._keepalive_s = kwargs.get("stop_frame_timeout_s", PIPECAT_STOP_FRAME_TIMEOUT_S) / 3
        self._keepalive: asyncio.Task[None] | None = None

    def can_generate_metrics(self) -> bool:
        return True

    @property
    def _voice(self) -> str | None:
        voice = self._settings.voice
        return voice if isinstance(voice, str) and voice else None

    # ---- the session -----------------------------------------------------------------------

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        try:
            check_sample_rate(self.sample_rate)
        except ValueError as exc:
            await self.push_error(error_msg=str(exc), exception=exc, fatal=True)
            return
        self._keepalive = self.create_task(self._keep_contexts_alive(), name="kokoro_keepalive")
        await self._connect()

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)  # waits until every context has played
        await self._disconnect()
        await self._stop_keepalive()

    async def cancel(self, frame: CancelFrame) -> None:
        await super().cancel(frame)
        await self._disconnect()
        await self._stop_keepalive()

    async def _keep_contexts_alive(self) -> None:
        """While the server still owes a context audio, pipecat must not end it for being quiet."""
        while True:
            await asyncio.sleep(self._keepalive_s)
            for context_id in list(self._contexts):
                if self.audio_context_available(context_id):
                    self._refresh_audio_context(context_id)

    async def _stop_keepalive(self) -> None:
        if self._keepalive is not None:
            await self.cancel_task(self._keepalive)
            self._keepalive = None

    async def _connect(self) -> bool:
        if self._session is not None and not self._session.closed:
            return True
        try:
            self._session = await open_session(self._target, voice=self._voice, speed=self._speed,
                                               sample_rate=self.sample_rate, timeout=self._connect_timeout,
                                               raise_errors=False, lang=self._lang)
        except (TtsError, OSError, TimeoutError) as exc:
            await self.push_error(error_msg=f"cannot open a Kokoro session: {exc}",
                                  exception=exc if isinstance(exc, Exception) else None)
            await self._call_event_handler("on_connection_error", str(exc))
            return False
        self._receiver = self.create_task(self._receive(self._session), name="kokoro_receive")
        await self._call_event_handler("on_connected")
        return True

    async def _disconnect(self) -> None:
        session, self._session = self._session, None
        if self._receiver is not None:
            await self.cancel_task(self._receiver)
            self._receiver = None
        if session is not None:
            await session.close()
            await self._call_event_handler("on_disconnected")
        self._contexts.clear()
        self._owner.clear()
        self._texts.clear()

    # ---- text in ---------------------------------------------------------------------------

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Cut ``text`` (a token, or a whole sentence outside TOKEN mode) into pieces and send them;
        the audio comes back through the receiving task."""
        if not await self._connect():
            yield ErrorFrame(error="no Kokoro session")
            return
        context = self._contexts.setdefault(context_id, _Context())
        pieces = context.cutter.feed(text) if self._is_streaming_tokens else [text]
        try:
            await self._speak(context_id, context, pieces)
        except TtsError as exc:
            yield ErrorFrame(error=f"Kokoro: {exc}")
            return
        yield None

    async def flush_audio(self, context_id: str | None = None) -> None:
        """The context's turn is over: speak what the chunker still holds; the context ends with
        its last piece."""
        context_id = context_id or self.get_active_audio_context_id()
        context = self._contexts.get(context_id) if context_id else None
        if context_id is None or context is None:
            return
        context.flushed = True
        try:
            await self._speak(context_id, context, context.cutter.flush())
        except TtsError as exc:
            await self.push_error(error_msg=f"Kokoro: {exc}", exception=exc)
            context.open.clear()
        await self._end_if_done(context_id, context)

    async def _speak(self, context_id: str, context: _Context, pieces: list[str]) -> None:
        session = self._session
        if session is None:
            raise TtsError("the Kokoro session is closed")
        for piece in pieces:
            if not piece.strip():
                continue
            context.pieces += 1
            uid = f"{context_id}.{context.pieces}"
            context.open.add(uid)
            self._owner[uid] = context_id
            self._texts[uid] = piece
            await session.speak(piece, id=uid, voice=self._voice, speed=self._speed)

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Barge-in: cancel this context's pieces still open (others, uninterruptible, go on)."""
        context = self._contexts.pop(context_id, None)
        if context is not None and context.open and self._session is not None:
            try:
                await self._session.cancel(ids=sorted(context.open))
            except TtsError as exc:
                logger.warning(f"{self}: cancel failed: {exc}")
        await super().on_audio_context_interrupted(context_id)

    # ---- audio and words out ---------------------------------------------------------------

    async def _receive(self, session: TtsSession) -> None:
        try:
            async for event in session.events():
                await self._handle(event)
        except TtsError as exc:
            if self._session is session:
                await self.push_error(error_msg=f"Kokoro session lost: {exc}", exception=exc)
                self._session = None
                for context_id, context in list(self._contexts.items()):
                    context.open.clear()
                    await self._end_if_done(context_id, context)

    async def _handle(self, event: TtsEvent) -> None:
        if isinstance(event, AudioChunk):
            context_id = self._owner.get(event.utterance_id or "")
            context = self._contexts.get(context_id) if context_id else None
            if context_id is None or context is None:
                return  # an interrupted context's leftovers
            context.audio_bytes += len(event.data)
            await self.append_to_audio_context(context_id, TTSAudioRawFrame(
                audio=event.data, sample_rate=self.sample_rate, num_channels=1, context_id=context_id))
            if not self.audio_context_available(context_id):  # pipecat ended it and would not take it back
                logger.warning(f"{self}: {len(event.data)} bytes of audio for context {context_id} dropped: "
                               "pipecat had already ended the context")
        elif isinstance(event, UtteranceStart):
            context_id = self._owner.get(event.id)
            if context_id is not None and (context := self._contexts.get(context_id)) is not None:
                context.base_s = context.audio_bytes / (SAMPLE_WIDTH * self.sample_rate)
        elif isinstance(event, Words):
            context_id = self._owner.get(event.id)
            if context_id is not None and (context := self._contexts.get(context_id)) is not None:
                await self.add_word_timestamps(
                    [(span.strip(), context.base_s + word.start_ms / 1000)
                     for span, word in word_spans(self._texts.get(event.id, ""), event.words) if span.strip()],
                    context_id)
        elif isinstance(event, UtteranceEnd):
            await self._piece_over(event.id)
        elif isinstance(event, Cancelled):
            for uid in event.ids:
                await self._piece_over(uid)
        elif isinstance(event, ErrorEvent):
            await self.push_error(error_msg=f"Kokoro: {event.code}: {event.message}")
            if event.id is not None:
                await self._piece_over(event.id)

    async def _piece_over(self, uid: str) -> None:
        context_id = self._owner.pop(uid, None)
        self._texts.pop(uid, None)
        context = self._contexts.get(context_id) if context_id else None
        if context_id is not None and context is not None:
            context.open.discard(uid)
            await self._end_if_done(context_id, context)

    async def _end_if_done(self, context_id: str, context: _Context) -> None:
        if not context.flushed or context.open:
            return
        self._contexts.pop(context_id, None)
        if self.audio_context_available(context_id):
            await self.stop_ttfb_metrics()
            await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))
            await self.remove_audio_context(context_id)
