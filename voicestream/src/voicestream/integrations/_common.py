"""What the framework plugins share: where the server is, opening a configured session, keeping a
warm one between answers, cutting LLM text into pieces, and word times as transcript pieces.

No framework is imported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from voicestream.chunker import IncrementalSentenceChunker
from voicestream.clients import TtsSession
from voicestream.protocol import SAMPLE_RATES, WordTime


@dataclass(frozen=True, kw_only=True)
class KokoroTarget:
    """The server: a local one by ``url`` (``http://127.0.0.1:8080``) or a SageMaker endpoint by
    ``endpoint_name``, with the SageMaker options every plugin takes as keyword arguments:

    * ``region``: else boto3's (``AWS_REGION``, the profile's);
    * ``endpoint_url``: the runtime's HTTPS URL, for a stand-in or a VPC endpoint (else
      ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` / ``AWS_ENDPOINT_URL``, else the Region's, port 8443);
    * ``ca_bundle``: a PEM file the TLS connection trusts instead of the system's (else
      ``AWS_CA_BUNDLE`` / the profile's); verification cannot be turned off;
    * credentials: ``aws_access_key_id`` + ``aws_secret_access_key`` (+ ``aws_session_token``), or
      ``profile_name``, or a ``boto_session``; else boto3's default chain.
    """

    url: str | None = None
    endpoint_name: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    ca_bundle: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)
    profile_name: str | None = None
    boto_session: Any | None = field(default=None, repr=False)  # a boto3.Session

    def __post_init__(self) -> None:
        if (self.url is None) == (self.endpoint_name is None):
            raise ValueError("give exactly one of url (a local server) or endpoint_name (SageMaker)")
        given = [name for name in _SAGEMAKER_OPTIONS if getattr(self, name) is not None]
        if self.url is not None and given:
            raise ValueError(f"{given[0]}: a SageMaker option; a local server (url) takes none of {', '.join(given)}")
        if self.endpoint_url is not None and not self.endpoint_url.startswith("https://"):
            raise ValueError(f"endpoint_url: {self.endpoint_url!r} must be https:// (SageMaker's bidirectional "
                             "stream is HTTP/2 over TLS)")
        if (self.aws_access_key_id is None) != (self.aws_secret_access_key is None):
            raise ValueError("aws_access_key_id and aws_secret_access_key: give both or neither")
        if self.boto_session is not None and (self.aws_access_key_id is not None or self.profile_name is not None):
            raise ValueError("boto_session: give either a boto_session or keys / profile_name, not both")

    def _boto_session(self) -> Any | None:
        """The boto3 session the options name; None: boto3's default chain."""
        if self.boto_session is not None:
            return self.boto_session
        if self.aws_access_key_id is None and self.profile_name is None:
            return None
        import boto3

        return boto3.Session(aws_access_key_id=self.aws_access_key_id, aws_secret_access_key=self.aws_secret_access_key,
                             aws_session_token=self.aws_session_token, profile_name=self.profile_name,
                             region_name=self.region)

    async def connect(self, *, open_timeout: float, raise_errors: bool = True) -> TtsSession:
        # receive_timeout None: a session waits for the LLM's next words as long as the LLM takes;
        # the framework's own timeouts and interruptions end a stuck answer.
        if self.url is not None:
            from voicestream.clients import connect_local

            return await connect_local(self.url, receive_timeout=None, open_timeout=open_timeout,
                                       raise_errors=raise_errors)
        from voicestream.clients import connect_sagemaker

        assert self.endpoint_name is not None
        return await connect_sagemaker(self.endpoint_name, region=self.region, boto_session=self._boto_session(),
                                       endpoint_url=self.endpoint_url, ca_bundle=self.ca_bundle,
                                       receive_timeout=None, connect_timeout=open_timeout, raise_errors=raise_errors)


#: What only a SageMaker endpoint takes (KokoroTarget's docstring).
_SAGEMAKER_OPTIONS = ("region", "endpoint_url", "ca_bundle", "aws_access_key_id", "aws_secret_access_key",
                      "aws_session_token", "profile_name", "boto_session")


def check_sample_rate(sample_rate: int) -> int:
    if sample_rate not in SAMPLE_RATES:
        raise ValueError(f"sample_rate: the server encodes pcm at {SAMPLE_RATES}, not {sample_rate}")
    return sample_rate


async def open_session(
    target: KokoroTarget, *, voice: str | None, speed: float | None, sample_rate: int, timeout: float,
    raise_errors: bool = True, lang: str | None = None,
) -> TtsSession:
    """A session configured for raw pcm at ``sample_rate`` with word timestamps, in ``lang`` (None:
    each voice's language); an unknown voice, a bad speed or a language the server does not serve
    raises the server's refusal (TtsServerError) here, before any text is sent."""
    session = await asyncio.wait_for(target.connect(open_timeout=timeout, raise_errors=raise_errors), timeout)
    try:  # configure raises a refusal (TtsServerError) whatever raise_errors says
        await asyncio.wait_for(session.configure(voice=voice, speed=speed, format="pcm",
                                                 sample_rate=sample_rate, timestamps=True, lang=lang), timeout)
    except BaseException:
        await session.close()
        raise
    return session


class SessionPool:
    """Keeps up to ``max_idle`` configured sessions warm between answers, so an answer's first
    words do not wait for a connection (and, through SageMaker, a TLS handshake)."""

    def __init__(self, opener: Callable[[], Awaitable[TtsSession]], *, max_idle: int = 1,
                 max_idle_s: float = 240.0) -> None:
        self._open = opener
        self._idle: list[tuple[TtsSession, float]] = []
        self._max_idle = max_idle
        self._max_idle_s = max_idle_s  # under the server's idle timeout (300 s)
        self._closed = False

    async def acquire(self) -> TtsSession:
        now = time.monotonic()
        while self._idle:
            session, since = self._idle.pop()
            if not session.closed and now - since < self._max_idle_s:
                return session
            await session.close()
        return await self._open()

    async def release(self, session: TtsSession) -> None:
        """Give back a session whose last answer ended cleanly (nothing of it still coming)."""
        if self._closed or session.closed or len(self._idle) >= self._max_idle:
            await session.close()
            return
        self._idle.append((session, time.monotonic()))

    async def prewarm(self) -> None:
        if not self._idle and not self._closed:
            await self.release(await self._open())

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for session, _ in idle:
            with contextlib.suppress(Exception):
                await session.close()


class PieceCutter:
    """LLM text in, speakable pieces out: the project's chunker with an early first fragment (the
    first clause of an answer is spoken once it has five words, before its sentence ends)."""

    def __init__(self) -> None:
        self._chunker = IncrementalSentenceChunker(early_first_fragment=True)

    def feed(self, text: str) -> list[str]:
        return [p for p in self._chunker.feed(text) if p.strip()]

    def flush(self) -> list[str]:
        return [p for p in self._chunker.flush() if p.strip()]

    def reset(self) -> None:
        self._chunker.reset()


def word_spans(text: str, words: tuple[WordTime, ...]) -> Iterator[tuple[str, WordTime]]:
    """Each word with the stretch of ``text`` it stands for: from its start to the next word's
    start (the first also takes what precedes it, the last what follows), so the stretches joined
    are ``text`` again and punctuation and spaces ride with the word before them."""
    valid: list[WordTime] = []
    for w in words:  # in order and inside the text (the server promises both; a bad one is skipped)
        if 0 <= w.char_start <= w.char_end <= len(text) and (not valid or w.char_start >= valid[-1].char_end):
            valid.append(w)
    for i, word in enumerate(valid):
        start = 0 if i == 0 else word.char_start
        end = valid[i + 1].char_start if i + 1 < len(valid) else len(text)
        if end > start:
            yield text[start:end], word
