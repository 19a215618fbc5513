"""`deploy-agent chat`: talk to the deployed voice agent (or a local one with --url) from a terminal,
or, with --web, from the agent's browser page served locally (cli/agent_web.py).

Text streams to stdout as the agent writes it; the speech is written to a WAV file with --save
(a terminal has no good way to play PCM). Without a prompt argument it reads prompts line by line
and keeps one AgentCore session, so the agent remembers the conversation; Ctrl-C during an
answer closes its stream, which stops the turn (barge-in), and the session goes on.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
import wave
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from cli.aws import CliError, cli_errors, get_stack, make_target, require_outputs, stack_outputs
from cli.options import Profile, Region
from cli.stacks import AGENT_STACK
from voicestream.protocol import NATIVE_SAMPLE_RATE


def sse_events(lines: Iterable[bytes | str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``data:`` lines (the agent sends one event per line)."""
    for raw in lines:
        line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if line.startswith("data:"):
            event = json.loads(line[5:].strip())
            if isinstance(event, dict):
                yield event


class TurnPrinter:
    """Prints one turn: text as it comes, then a summary line; collects audio for --save."""

    def __init__(self, *, out: IO[str], err: IO[str]) -> None:
        self._out = out
        self._err = err
        self.audio = bytearray()
        self.end: dict[str, Any] | None = None

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "text":
            self._out.write(str(event.get("text", "")))
            self._out.flush()
        elif kind == "audio":
            self.audio += base64.b64decode(event.get("audio", ""))
        elif kind == "error":
            self._err.write(f"\n[error {event.get('code')}] {event.get('message')}\n")
        elif kind == "interrupted":
            self._out.write(" [interrupted]")
        elif kind == "end":
            self.end = event
            ttfa = event.get("ttfa_ms")
            self._out.write("\n")
            self._err.write(f"[{event.get('mode')}: first audio {ttfa if ttfa is not None else '-'} ms, "
                            f"{event.get('audio_ms', 0) / 1000:.1f} s of speech]\n")


def save_wav(path: Path, pcm: bytes) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(NATIVE_SAMPLE_RATE)  # the agent passes the TTS server's pcm on unchanged
        out.writeframes(pcm)


class Transport:
    """Sends one request and returns its SSE lines: the AgentCore runtime, or a local agent URL."""

    def __init__(self, *, url: str | None, runtime_arn: str | None, client: Any = None) -> None:
        self._url = url.rstrip("/") if url else None
        self._arn = runtime_arn
        self._client = client
        self.session_id = f"chat-{uuid.uuid4()}"  # AgentCore wants at least 33 characters

    def send(self, payload: dict[str, Any]) -> Iterator[bytes | str]:
        body = json.dumps(payload).encode()
        if self._url is not None:
            import httpx

            headers = {"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": self.session_id}
            with httpx.stream("POST", f"{self._url}/invocations", content=body, headers=headers,
                              timeout=httpx.Timeout(120.0), trust_env=False) as response:
                yield from response.iter_lines()
            return
        response = self._client.invoke_agent_runtime(
            agentRuntimeArn=self._arn, runtimeSessionId=self.session_id, payload=body,
            contentType="application/json", accept="text/event-stream",
        )
        yield from response["response"].iter_lines()


def run_turn(transport: Transport, payload: dict[str, Any], *, out: IO[str], err: IO[str]) -> TurnPrinter:
    printer = TurnPrinter(out=out, err=err)
    try:
        for event in sse_events(transport.send(payload)):
            printer.handle(event)
    except KeyboardInterrupt:  # closing the stream is the barge-in: the agent stops the turn
        printer.handle({"type": "interrupted"})
        out.write("\n")
    return printer


def chat(
    prompt: Annotated[str | None, typer.Argument(help="One prompt; omit to chat line by line.")] = None,
    mode: Annotated[str, typer.Option("--mode", help="bidi (speak while writing) or batch.")] = "bidi",
    voice: Annotated[str | None, typer.Option("--voice", help="TTS voice (default: the agent's).")] = None,
    save: Annotated[Path | None, typer.Option("--save", help="Write the speech to this WAV file.")] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="A local agent (http://127.0.0.1:8090) instead of AWS.")
    ] = None,
    web: Annotated[
        bool, typer.Option("--web", help="Serve the agent's browser page locally instead, connected to the "
                           "runtime with presigned WebSocket URLs (or to --url).")
    ] = False,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="--web: local port (0: any free one).")] = 8091,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="--web: open the page in the default browser.")
    ] = True,
    region: Region = None,
    profile: Profile = None,
) -> None:
    """Chat with the voice agent: text on stdout, speech to --save; or in the browser with --web."""
    with cli_errors():
        if mode not in ("bidi", "batch"):
            raise CliError(f"--mode must be bidi or batch, got {mode!r}")
        if web:
            _chat_web(url=url, port=port, open_browser=open_browser, region=region, profile=profile,
                      unused={"a prompt": prompt is not None, "--save": save is not None, "--voice": bool(voice)})
            return
        if url is None:
            target = make_target(profile=profile, region=region)
            transport = Transport(url=None, runtime_arn=_runtime_arn(target),
                                  client=target.client("bedrock-agentcore"))
        else:
            transport = Transport(url=url, runtime_arn=None)
        prompts = [prompt] if prompt is not None else _read_prompts()
        speech = bytearray()
        for text in prompts:
            payload: dict[str, Any] = {"prompt": text, "mode": mode}
            if voice:
                payload["voice"] = voice
            speech += run_turn(transport, payload, out=sys.stdout, err=sys.stderr).audio
        if save is not None:
            save_wav(save, bytes(speech))
            sys.stderr.write(f"[speech written to {save}]\n")


def _runtime_arn(target: Any) -> str:
    outputs = stack_outputs(get_stack(target.client("cloudformation"), AGENT_STACK))
    require_outputs(AGENT_STACK, outputs, "RuntimeArn")
    return outputs["RuntimeArn"]


def _chat_web(*, url: str | None, port: int, open_browser: bool, region: str | None, profile: str | None,
              unused: dict[str, bool]) -> None:
    """--web: the page asks the local server for a fresh (presigned) WebSocket URL per connection."""
    from cli.agent_web import LocalAgentUrl, RuntimeUrlSigner, serve_web

    given = [name for name, present in unused.items() if present]
    if given:
        raise CliError(f"--web does not take {', '.join(given)}: the page has its own prompt box and player.")
    if url is not None:
        provider: Any = LocalAgentUrl(url)
        where = provider.url
    else:
        target = make_target(profile=profile, region=region)
        arn = _runtime_arn(target)
        provider = RuntimeUrlSigner(session=target.session, region=target.region, runtime_arn=arn)
        where = f"{arn} (presigned URLs, {provider.expires_s} s each)"
    serve_web(provider, port=port, open_browser=open_browser, target=where)


def _read_prompts() -> Iterator[str]:
    while True:
        try:
            line = input("you> ")
        except (EOFError, KeyboardInterrupt):
            return
        if line.strip():
            yield line
