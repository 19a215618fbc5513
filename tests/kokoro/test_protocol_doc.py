"""docs/protocol.md says what the server does: its tagged examples are sent to the real server
(tiny model) and what comes back must have the documented shape.

An example in the doc is an HTML comment, then a fenced json block (the request), then optionally
``<!-- answer -->`` and a fenced block (the answer, json or SSE text)::

    <!-- example: POST /invocations -> 400 -->    status, and optionally a content type prefix
    <!-- example: GET /ping -> 200 -->            for GET the block is the answer
    <!-- example: WS /invocations-bidirectional-stream -->   the answer is the first text frame

An answer matches when it has exactly the documented keys (recursively), the same JSON types, and
the same values for the fields that identify rather than measure (``IDENTIFYING``); a documented
string ending in ``...`` is a prefix. So a field added, dropped or renamed, a status or an error
code changed, fails here until the doc says so.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from kokoro_harness import Server, free_port
from waiting import wait_until

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
EXAMPLE = re.compile(
    r"<!-- example: (?P<method>GET|POST|WS) (?P<path>\S+)(?: -> (?P<status>\d{3})(?: (?P<ctype>\S+))?)? -->\n"
    r"```json\n(?P<block>.*?)```\n"
    r"(?:<!-- answer -->\n```(?P<kind>\w+)\n(?P<answer>.*?)```\n)?",
    re.DOTALL,
)
IDENTIFYING = frozenset({"type", "status", "code", "field", "param", "message", "id", "request_id", "text"})
BODY_LIMIT = re.compile(r"\| \(fixed\) \| ([\d ]+) bytes per POST body \|")


@dataclass(frozen=True)
class Example:
    method: str
    path: str
    status: int | None
    content_type: str | None
    request: Any
    answer_kind: str | None
    answer: str | None

    def __str__(self) -> str:
        return f"{self.method} {self.path} {json.dumps(self.request)[:60]}"


def examples() -> list[Example]:
    found = [Example(m["method"], m["path"], int(m["status"]) if m["status"] else None, m["ctype"],
                     json.loads(m["block"]), m["kind"], m["answer"]) for m in EXAMPLE.finditer(DOC.read_text())]
    assert len(found) == DOC.read_text().count("<!-- example:"), "an example tag the pattern does not read"
    return found


def conforms(documented: Any, actual: Any, where: str = "", key: str = "") -> list[str]:
    """Every way ``actual`` differs from the documented shape (empty: it matches)."""
    if isinstance(documented, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        problems = [f"{where}.{k}: documented, not sent" for k in documented.keys() - actual.keys()]
        problems += [f"{where}.{k}: sent, not documented" for k in actual.keys() - documented.keys()]
        for k in documented.keys() & actual.keys():
            problems += conforms(documented[k], actual[k], f"{where}.{k}", k)
        return problems
    if isinstance(documented, list):
        if not isinstance(actual, list):
            return [f"{where}: expected a list, got {actual!r}"]
        return conforms(documented[0], actual[0], f"{where}[0]", key) if documented and actual else []
    if isinstance(documented, bool) or documented is None:
        return [] if type(actual) is type(documented) else [f"{where}: expected {documented!r}, got {actual!r}"]
    if isinstance(documented, int | float):
        numeric = isinstance(actual, int | float) and not isinstance(actual, bool)
        return [] if numeric else [f"{where}: expected a number, got {actual!r}"]
    if not isinstance(actual, str):
        return [f"{where}: expected a string, got {actual!r}"]
    if key in IDENTIFYING:
        prefix = documented.removesuffix("...")
        same = actual.startswith(prefix) if documented.endswith("...") else actual == documented
        return [] if same else [f"{where}: documented {documented!r}, got {actual!r}"]
    return []


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``event:``/``data:`` pairs; runs of the same event (the audio chunks) kept once, as documented."""
    events: list[tuple[str, dict[str, Any]]] = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.strip().splitlines())
        name, data = fields["event"], json.loads(fields["data"])
        if not events or events[-1][0] != name:
            events.append((name, data))
    return events


def check_answer(example: Example, answer: Any) -> None:
    if example.answer_kind == "json":
        problems = conforms(json.loads(example.answer or ""), answer)
    else:
        documented, sent = sse_events(example.answer or ""), sse_events(answer)
        assert [n for n, _ in sent] == [n for n, _ in documented], (str(example), sent)
        problems = [p for (name, doc), (_, got) in zip(documented, sent, strict=True) for p in conforms(doc, got, name)]
    assert not problems, f"{example}: the answer differs from docs/protocol.md:\n" + "\n".join(problems)


HTTP = [e for e in examples() if e.method != "WS"]
WS = [e for e in examples() if e.method == "WS"]


@pytest.mark.parametrize("example", HTTP, ids=str)
def test_each_documented_http_example(server: Server, example: Example) -> None:
    if example.method == "GET":
        response = httpx.get(f"{server.http}{example.path}", timeout=60)
        answer: Any = response.json()
        example = Example(example.method, example.path, example.status, example.content_type, None, "json",
                          json.dumps(example.request))
    else:
        response = httpx.post(f"{server.http}{example.path}", json=example.request, timeout=120)
        kind = response.headers["content-type"]
        answer = response.json() if kind.startswith("application/json") else response.text
    assert response.status_code == example.status, (str(example), response.status_code, response.text[:300])
    if example.content_type:
        assert response.headers["content-type"].startswith(example.content_type), str(example)
        assert response.content, str(example)
    if example.answer is not None:
        check_answer(example, answer)


async def first_text_frame(url: str, message: Any) -> Any:
    async with websockets.connect(url, proxy=None) as ws:
        await ws.send(json.dumps(message))
        while True:
            frame = await asyncio.wait_for(ws.recv(), timeout=60)
            if isinstance(frame, str):
                return json.loads(frame)


@pytest.mark.parametrize("example", WS, ids=str)
def test_each_documented_websocket_example(server: Server, example: Example) -> None:
    check_answer(example, asyncio.run(first_text_frame(server.ws, example.request)))
    server.wait_idle()


def test_the_documented_post_body_limit_is_the_one_enforced(server: Server) -> None:
    found = BODY_LIMIT.search(DOC.read_text())
    assert found, "docs/protocol.md's limits table names no POST body limit"
    limit = int(found.group(1).replace(" ", ""))
    body = b'{"text": "Hi."}'
    at_limit = body + b" " * (limit - len(body))  # JSON allows trailing whitespace
    for path in ("/invocations", "/v1/audio/speech"):
        over = httpx.post(f"{server.http}{path}", content=at_limit + b" ", timeout=60)
        assert over.status_code == 413 and over.json()["error"]["code"] == "body_too_large", path
    accepted = httpx.post(f"{server.http}/invocations", content=at_limit, timeout=120)
    assert accepted.status_code == 200 and accepted.content, accepted.text[:300]


@pytest.mark.live_server
def test_the_port_opens_only_when_ping_says_ok(tiny_model: Path, tmp_path: Path) -> None:
    """What docs/protocol.md says of /ping while loading: no 503 `loading`, a closed port."""
    port = free_port()
    seen: list[int] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as answer:
                    seen.append(answer.status)
            except urllib.error.HTTPError as refused:
                seen.append(refused.code)
            except OSError:
                pass
            done.wait(0.05)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    server = Server(model_dir=tiny_model, log_path=tmp_path / "server.log", port=port,
                    python=sys.executable)
    try:
        server.start(timeout_s=180)
        # start() returns on its own first 200; let the watcher get one of its own too.
        wait_until(lambda: list(seen), timeout=30)
    finally:
        done.set()
        watcher.join(timeout=5)
        server.stop()
    assert seen and set(seen) == {200}, seen
