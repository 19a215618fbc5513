"""Property tests of the TTS server's protocol with hypothesis: hostile frames and bodies.

Split (every run, in ``make test``): 6 000 generated frames through the parser in-process
(``parse_client_message``), 1 500 bodies through ``parse_request``; then against the live server
1 500 generated cases over one persistent WebSocket (each 1-4 frames, then ``cancel`` and
``ping``) and 400 ``POST /invocations`` bodies. After every live case the socket got an error
frame (for a case that holds invalid input) and only valid server frames, and it is still open;
every 100 cases /ping answers; at the end the server is idle with no task left over.

Examples are drawn by fuzz_profile.py: the same ones on every run by default (derandomized, so CI
never fails by chance), new random ones, ten times as many, with ``KOKORO_FUZZ_EXPLORE=1``. Every
failure a run found is kept as an ``@example`` on its test.
"""

from __future__ import annotations

import json
import string
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fuzz_profile import fuzz_settings
from hypothesis import example, given
from hypothesis import strategies as st
from kokoro_harness import Server
from waiting import wait_until
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as sync_connect

from voicestream.protocol import (
    FORMATS,
    MESSAGE_TYPES,
    SAMPLE_RATES,
    Ping,
    ProtocolError,
    parse_client_message,
    parse_request,
)

pytestmark = pytest.mark.kokoro

IN_PROCESS_FRAMES = 6_000
IN_PROCESS_BODIES = 1_500
LIVE_WS_CASES = 1_500
LIVE_POST_CASES = 400

ERROR_CODES = {"invalid_json", "invalid_field", "unknown_type", "text_too_long", "frame_too_large",
               "unknown_voice", "duplicate_id", "queue_full", "synthesis_failed"}
SERVER_TYPES = {"configured", "utterance_start", "utterance_end", "turn_end", "cancelled", "pong", "error",
                "synthesis_start", "synthesis_complete"}
FIELDS = ["type", "text", "id", "voice", "speed", "format", "sample_rate", "request_id", "transport", "extra"]

# ---- strategies ---------------------------------------------------------------------------

json_leaf = (st.none() | st.booleans() | st.integers() | st.sampled_from([10**400, -(10**400), 2**63, 10**4000])
             | st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False) | st.text(max_size=30))
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=10)
tiny_text = st.sampled_from(["Hi.", "Ok.", "Yes.", "No, thanks.", "Sure"])
field_value = st.one_of(
    json_value, tiny_text, st.sampled_from(["af_heart", "am_michael", "nobody", "", " "]),
    st.sampled_from([0.5, 1.0, 2.0, 0.49, 2.01, True, "1", 10**400, -(10**400)]),
    st.sampled_from(list(FORMATS) + ["ogg", 7]),
    st.sampled_from(list(SAMPLE_RATES) + [0, 24000.0, -1]),
    st.text(max_size=200).map(lambda t: t + "\ud800"),  # a lone surrogate (JSON escapes it)
)
message_type = st.sampled_from([t for t in MESSAGE_TYPES if t != "close"] + ["", "speak ", "SPEAK", "nope"])


@st.composite
def messages(draw: Any, *, types: Any = message_type) -> dict[str, Any]:
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)) > 0:
        message["type"] = draw(types | json_value) if draw(st.integers(0, 9)) == 0 else draw(types)
    for name in draw(st.lists(st.sampled_from(FIELDS[1:]), max_size=4, unique=True)):
        message[name] = draw(field_value)
    return message


TEMPLATES = [
    {"type": "speak", "text": "Hi.", "id": "u1", "voice": "af_heart", "speed": 1.0},
    {"type": "configure", "voice": "af_heart", "speed": 1.0, "format": "pcm", "sample_rate": 24000},
    {"type": "delta", "text": "Hi"}, {"text": "Hi.", "voice": "am_michael", "speed": 1.0, "request_id": "r1"},
]


@st.composite
def near_valid(draw: Any) -> dict[str, Any]:
    """A valid message with one field changed, dropped or added: the validators' edges."""
    message = dict(draw(st.sampled_from(TEMPLATES)))
    name = draw(st.sampled_from(FIELDS[1:] + list(message)))
    if draw(st.booleans()) and name in message:
        del message[name]
    else:
        message[name] = draw(field_value)
    return message


def truncated_utf8(message: dict[str, Any]) -> bytes:
    """The message's JSON with non-ASCII text after it, cut inside a three-byte character."""
    data = json.dumps(message).encode()[:-1] + ' "déjà vu ✓"}'.encode()
    return data[:data.index("✓".encode()) + 1]


frames = st.one_of(
    messages().map(json.dumps),
    near_valid().map(json.dumps),
    messages().map(lambda m: json.dumps(m).encode()),  # binary frames holding JSON
    st.binary(max_size=300),
    st.text(max_size=300),
    messages().map(truncated_utf8),
    st.integers(1, 60_000).map(lambda n: "[" * n),  # deep nesting
    st.integers(10_001, 12_000).map(lambda n: json.dumps({"type": "speak", "text": "a" * n})),  # text_too_long
    st.integers(65_537, 70_000).map(lambda n: b"x" * n),  # frame_too_large
    json_value.map(json.dumps),
)


def valid_cheap() -> Any:
    """Messages that do work, kept tiny; each case ends with a cancel, so they end quickly."""
    return st.one_of(
        st.builds(lambda t: {"type": "speak", "text": t}, tiny_text),
        st.builds(lambda t: {"type": "delta", "text": t}, tiny_text),
        st.just({"type": "flush"}), st.just({"type": "cancel"}), st.just({"type": "ping"}),
        # every format, so utterances switch between codecs within the one session
        st.builds(lambda f: {"type": "configure", "format": f}, st.sampled_from(list(FORMATS))),
        st.builds(lambda t: {"text": t, "request_id": "legacy"}, tiny_text),
    ).map(json.dumps)


def refusals_and_pings(sent: list[str | bytes]) -> tuple[int, int]:
    """How many of the frames the protocol refuses (each must be answered by an error frame),
    and how many are pings (each answered by a pong)."""
    refused = pings = 0
    for frame in sent:
        try:
            pings += isinstance(parse_client_message(frame), Ping)
        except ProtocolError:
            refused += 1
    return refused, pings


@st.composite
def cases(draw: Any) -> list[str | bytes]:
    """1-4 frames. About one case in twelve carries a message that starts synthesis (the
    expensive kind); the hostile generators may produce valid messages too."""
    sent: list[str | bytes] = draw(st.lists(frames, min_size=1, max_size=3))
    if draw(st.integers(0, 11)) == 0:
        shuffled: list[str | bytes] = draw(st.permutations(sent + [draw(valid_cheap())]))
        return shuffled
    return sent


# ---- in-process -----------------------------------------------------------------------------


def refused_cleanly(error: ProtocolError) -> None:
    assert error.code in ERROR_CODES, error.code
    json.dumps(error.to_dict())  # the error frame is serializable


@fuzz_settings(IN_PROCESS_FRAMES)
@given(st.one_of(frames, valid_cheap()))
def test_parser_takes_any_frame_or_refuses_it_with_a_protocol_error(raw: str | bytes) -> None:
    try:
        parse_client_message(raw)
    except ProtocolError as error:
        refused_cleanly(error)


@fuzz_settings(IN_PROCESS_BODIES)
@given(st.one_of(messages().map(json.dumps), st.binary(max_size=200), json_value.map(json.dumps),
                 messages().map(truncated_utf8)))
def test_request_parser_takes_any_body_or_refuses_it_with_a_protocol_error(raw: str | bytes) -> None:
    try:
        parse_request(raw)
    except ProtocolError as error:
        refused_cleanly(error)


# ---- live WebSocket --------------------------------------------------------------------------


class Fuzzer:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.ws: ClientConnection = sync_connect(server.ws, max_size=None, open_timeout=10, legacy=True)
        self.cases = 0
        self.synthesis_cases = 0

    def exchange(self, sent: list[str | bytes]) -> list[Any]:
        """Send the frames, a cancel and a ping; return every frame up to that last pong."""
        pongs = refusals_and_pings(sent)[1] + 1
        for frame in sent:
            self.ws.send(frame)
        self.ws.send(json.dumps({"type": "cancel"}))
        self.ws.send(json.dumps({"type": "ping"}))
        received: list[Any] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            frame = self.ws.recv(timeout=60)
            if isinstance(frame, bytes):
                received.append(frame)
                continue
            event = json.loads(frame)
            received.append(event)
            if event.get("type") == "pong":
                pongs -= 1
                if pongs == 0:
                    return received
        raise AssertionError(f"no pong within 60 s after {sent!r:.300}")


@pytest.fixture(scope="module")
def fuzzer(server: Server) -> Iterator[Fuzzer]:
    baseline, fds_before = server.wait_idle()["tasks"], server.idle_fds()
    fuzz = Fuzzer(server)
    yield fuzz
    fuzz.ws.close()
    status = server.wait_idle()
    assert (status["sessions"], status["queued"], status["running"]) == (0, 0, 0), status
    # On a loaded machine finished tasks take a while to go.
    status = wait_until(server.diagnostics, until=lambda ping: ping["tasks"] <= baseline, timeout=30)
    assert status["tasks"] <= baseline, (status, baseline)
    fds_after = server.fds_down_to(fds_before)  # closed sockets too (polled without a request)
    assert fds_after <= fds_before, (fds_after, fds_before)


@fuzz_settings(LIVE_WS_CASES)
@given(cases())
# G2P: a number past num2words' ~307 digits raised OverflowError (now read digit by digit)
@example([json.dumps({"type": "speak", "text": "Call me at " + "9" * 400 + " tomorrow."})])
@example([json.dumps({"text": "x", "request_id": "\ud800"}), json.dumps({"text": "Hi.", "request_id": "日本"})])
def test_live_session_answers_every_hostile_case_and_stays_open(fuzzer: Fuzzer, sent: list[str | bytes]) -> None:
    received = fuzzer.exchange(sent)
    fuzzer.cases += 1
    events = [e for e in received if isinstance(e, dict)]
    for event in events:
        assert event.get("type") in SERVER_TYPES, event
        if event["type"] == "error":
            assert event["code"] in ERROR_CODES and isinstance(event["message"], str), event
    if any(e["type"] in ("utterance_start", "synthesis_start") for e in events):
        fuzzer.synthesis_cases += 1
    # the cancel we sent is answered, and nothing of the cancelled work follows it
    cancelled = [i for i, e in enumerate(received) if isinstance(e, dict) and e.get("type") == "cancelled"]
    assert cancelled, received[-5:]
    assert all(isinstance(e, dict) and e["type"] in ("pong", "cancelled", "error", "configured")
               for e in received[cancelled[-1] + 1:]), received[cancelled[-1]:]
    # every refused frame got its error frame (the server may refuse more: unknown voice, ...)
    assert sum(e["type"] == "error" for e in events) >= refusals_and_pings(sent)[0], (sent, events)
    if fuzzer.cases % 100 == 0:
        assert httpx.get(f"{fuzzer.server.http}/ping", timeout=10).json()["status"] == "ok"


def test_live_fuzzing_ran_its_cases(fuzzer: Fuzzer) -> None:
    """Runs after the property (file order): the cases ran, some of them made audio."""
    assert fuzzer.cases >= LIVE_WS_CASES * 0.9, fuzzer.cases
    assert fuzzer.synthesis_cases > 0


# ---- live POST /invocations ------------------------------------------------------------------


post_bodies = st.one_of(
    messages().map(lambda m: json.dumps({k: v for k, v in m.items() if k != "type"})),
    st.binary(max_size=300), json_value.map(json.dumps), messages().map(truncated_utf8),
    st.integers(10_001, 11_000).map(lambda n: json.dumps({"text": "a" * n})),
    st.builds(lambda t, f, tr: json.dumps({"text": t, "format": f, "transport": tr}),
              tiny_text, st.sampled_from(list(FORMATS)), st.sampled_from(["binary", "sse"])),
    st.text(alphabet=string.printable, max_size=100),
)


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    """After the bodies: the server is idle, and its asyncio tasks (``/diagnostics``) and file descriptors
    (``/proc/<pid>/fd``) are back to what they were before them."""
    tasks_before, fds_before = server.wait_idle()["tasks"], server.idle_fds()
    with httpx.Client(base_url=server.http, timeout=60) as client:
        yield client
    # The model finishes what the last bodies asked for; connections wind down.
    status = wait_until(server.diagnostics, timeout=30, until=lambda ping: (ping["queued"], ping["running"]) == (0, 0)
                        and ping["tasks"] <= tasks_before)
    assert (status["queued"], status["running"]) == (0, 0), status
    assert status["tasks"] <= tasks_before, (status["tasks"], tasks_before)
    fds_after = server.fds_down_to(fds_before)
    assert fds_after <= fds_before, (fds_after, fds_before)


@fuzz_settings(LIVE_POST_CASES)
@given(post_bodies)
@example(json.dumps({"request_id": "\ud800", "text": "Hi."}))  # found by this test: a 500 (a lone surrogate)
@example(json.dumps({"request_id": "日本", "text": "Hi."}))  # 500: not latin-1, the X-Request-Id header failed
@example(json.dumps({"request_id": "a\nb", "text": "Hi."}))  # the connection dropped: no valid header value
@example(json.dumps({"text": "Call me at " + "9" * 400 + " tomorrow."}))  # G2P raised: the body was cut
def test_live_post_answers_any_body_with_audio_or_a_json_error(http: httpx.Client, body: str | bytes) -> None:
    response = http.post("/invocations", content=body, headers={"Content-Type": "application/json"})
    if response.status_code == 200:
        assert len(response.content) > 0
        if response.headers["content-type"].startswith("text/event-stream"):
            assert "event: end" in response.text
    else:
        assert response.status_code in (400, 413), response.status_code
        assert response.json()["error"]["code"] in ERROR_CODES | {"body_too_large"}
