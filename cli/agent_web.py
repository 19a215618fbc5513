"""`deploy-agent chat --web`: the agent's browser page served locally, talking to the deployed runtime.

A browser cannot sign a WebSocket upgrade with SigV4 headers, so the page connects to AgentCore
with a *presigned* URL (SigV4 in the query string, valid at most 300 s). This server holds the
AWS credentials and signs on request: the page asks ``GET /ws-url`` before every (re)connection
and gets a URL signed a moment ago, so an expiring URL never has to be renewed in place (a URL
only has to be valid when the socket opens). With ``--url`` the same page talks to a local agent
instead (no signing).

Routes (bound to 127.0.0.1 only; other Host headers are refused, against DNS rebinding):

- ``GET /`` and ``GET /web/app.js``: the agent's page, read from ``voice_agent/web``.
- ``GET /ws-url[?session=ID]``: ``{"url", "session_id", "expires_in"}``. The page passes back the
  session id it got first, so its reconnections stay in the same AgentCore runtime session (the
  same microVM); a reload starts a new one.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
import threading
import uuid
import webbrowser
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import NoCredentialsError

from cli.aws import CliError, describe_error

MAX_EXPIRES_S = 300  # AgentCore's limit for presigned WebSocket URLs
SERVICE = "bedrock-agentcore"
SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
# AgentCore runtime session ids: 33 to 256 characters.
_SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{32,255}")
_PAGE_FILES = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}

UrlProvider = Callable[[str], str]
"""Returns the WebSocket URL the page should open for a session id."""


def new_session_id() -> str:
    return f"web-{uuid.uuid4()}"  # 40 characters; AgentCore wants at least 33


def valid_session_id(value: str) -> bool:
    return _SESSION_RE.fullmatch(value) is not None


def runtime_ws_url(region: str, runtime_arn: str, *, dns_suffix: str = "amazonaws.com") -> str:
    """The unsigned https:// form of a runtime's WebSocket URL (the ARN URL-encoded, ``/`` too)."""
    return f"https://{SERVICE}.{region}.{dns_suffix}/runtimes/{quote(runtime_arn, safe='')}/ws"


def presign_with_botocore(credentials: Any, *, region: str, runtime_arn: str, session_id: str,
                          qualifier: str | None = None, expires: int = MAX_EXPIRES_S,
                          dns_suffix: str = "amazonaws.com") -> str:
    """Presign with botocore's SigV4QueryAuth, building the URL the way bedrock-agentcore's
    ``AgentCoreRuntimeClient.generate_presigned_url`` does (used when that SDK is not installed)."""
    params = {"qualifier": qualifier} if qualifier else {}
    params[SESSION_HEADER] = session_id
    url = f"{runtime_ws_url(region, runtime_arn, dns_suffix=dns_suffix)}?{urlencode(params)}"
    request = AWSRequest(method="GET", url=url, headers={"host": urlsplit(url).hostname})
    SigV4QueryAuth(credentials, SERVICE, region, expires=expires).add_auth(request)
    return "wss://" + str(request.url).removeprefix("https://")


class RuntimeUrlSigner:
    """Presigned ``wss://`` URLs of one AgentCore runtime, signed with the boto3 session's
    credentials as they are at each call (refreshable ones, e.g. SSO or assumed roles, refresh)."""

    def __init__(self, *, session: Any, region: str, runtime_arn: str, qualifier: str | None = None,
                 expires: int = MAX_EXPIRES_S, use_sdk: bool = True) -> None:
        if not 0 < expires <= MAX_EXPIRES_S:
            raise ValueError(f"expires must be 1..{MAX_EXPIRES_S} seconds, got {expires}")
        self._session = session
        self.region = region
        self.runtime_arn = runtime_arn
        self.qualifier = qualifier
        self.expires_s = expires
        self._sdk: Any = None
        if use_sdk:
            try:
                from bedrock_agentcore.runtime import AgentCoreRuntimeClient
            except ImportError:  # the CLI alone does not depend on the agent's SDK
                pass
            else:
                self._sdk = AgentCoreRuntimeClient(region=region, session=session)

    @property
    def uses_sdk(self) -> bool:
        return self._sdk is not None

    def __call__(self, session_id: str) -> str:
        credentials = self._session.get_credentials()
        if credentials is None:  # a clear error rather than the SDK's generic RuntimeError
            raise NoCredentialsError()
        if self._sdk is not None:  # it takes get_credentials().get_frozen_credentials() itself
            return str(self._sdk.generate_presigned_url(runtime_arn=self.runtime_arn, session_id=session_id,
                                                        endpoint_name=self.qualifier, expires=self.expires_s))
        frozen = credentials.get_frozen_credentials()  # refreshes expiring credentials
        return presign_with_botocore(frozen, region=self.region, runtime_arn=self.runtime_arn,
                                     session_id=session_id, qualifier=self.qualifier, expires=self.expires_s,
                                     dns_suffix=_dns_suffix(self.region))


@functools.cache
def _dns_suffix(region: str) -> str:
    """The partition's DNS suffix (amazonaws.com, amazonaws.com.cn, ...) from botocore's bundled data."""
    from botocore.loaders import create_loader
    from botocore.regions import EndpointResolver

    resolver = EndpointResolver(create_loader().load_data("endpoints"))
    try:
        return str(resolver.get_partition_dns_suffix(resolver.get_partition_for_region(region)) or "amazonaws.com")
    except Exception:  # a region botocore does not know yet
        return "amazonaws.com"


class LocalAgentUrl:
    """The provider for ``--url``: a local agent's own ``/ws`` (no signing, no expiry)."""

    expires_s = None

    def __init__(self, base_url: str) -> None:
        base = base_url.rstrip("/")
        if base.startswith("https://"):
            self.url = "wss://" + base.removeprefix("https://") + "/ws"
        elif base.startswith("http://"):
            self.url = "ws://" + base.removeprefix("http://") + "/ws"
        elif base.startswith(("ws://", "wss://")):
            self.url = base if base.endswith("/ws") else base + "/ws"
        else:
            raise CliError(f"--url must start with http:// or https://, got {base_url!r}")

    def __call__(self, session_id: str) -> str:
        return self.url


def page_dir() -> Path:
    """The agent's ``web/`` folder: from the installed ``voice_agent`` package, else this checkout."""
    spec = importlib.util.find_spec("voice_agent")  # finds it without importing the agent
    candidates = [Path(p) / "web" for p in (spec.submodule_search_locations or [])] if spec else []
    candidates.append(Path(__file__).resolve().parents[1] / "agent" / "voice_agent" / "web")
    for folder in candidates:
        if (folder / "index.html").is_file() and (folder / "app.js").is_file():
            return folder
    raise CliError("The agent's page (voice_agent/web) was not found.",
                   hint="Run from the repository checkout, or install the agent (`make install`).")


class WebServer(ThreadingHTTPServer):
    """The page and ``/ws-url`` on 127.0.0.1; ``serve_forever`` in any thread, ``shutdown`` to stop."""

    daemon_threads = True

    def __init__(self, provider: UrlProvider, *, port: int = 0, web_dir: Path | None = None,
                 log: IO[str] | None = None) -> None:
        self.provider = provider
        self.web_dir = web_dir or page_dir()
        self.log = log
        self.signed = 0  # URLs handed out
        self._lock = threading.Lock()
        try:
            super().__init__(("127.0.0.1", port), _Handler)
        except OSError as exc:
            raise CliError(f"Cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}",
                           hint="Pick another port with --port (0 = any free one).") from None
        self.port = int(self.server_address[1])
        self.allowed_hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def ws_url(self, session: str | None) -> tuple[int, dict[str, Any]]:
        """The body of ``GET /ws-url``: status code and JSON."""
        if session is not None and not valid_session_id(session):
            return 400, {"error": "session must be 33-256 letters, digits, '-' or '_'"}
        session_id = session or new_session_id()
        try:
            url = self.provider(session_id)
        except Exception as exc:  # credentials gone or expired: the page shows it and retries
            error = describe_error(exc)
            message = error.message + (f" {error.hint}" if error.hint else "")
            if self.log:
                self.log.write(f"[could not sign a URL: {message}]\n")
            return 503, {"error": message}
        with self._lock:
            self.signed += 1
        expires = getattr(self.provider, "expires_s", None)
        if self.log:
            self.log.write(f"[connection URL for {session_id}"
                           + (f", valid {expires} s]\n" if expires else "]\n"))
        return 200, {"url": url, "session_id": session_id, "expires_in": expires}


class _Handler(BaseHTTPRequestHandler):
    server: WebServer
    server_version = "deploy-agent-chat"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # no access log on the terminal

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.headers.get("Host") not in self.server.allowed_hosts:
            return self._send(403, "text/plain", b"unexpected Host header")
        parts = urlsplit(self.path)
        if parts.path == "/ws-url":
            # Readable only by the page itself: a cross-site request gets nothing signed.
            if self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
                return self._send(403, "text/plain", b"cross-site request")
            session = parse_qs(parts.query).get("session", [None])[0]
            status, body = self.server.ws_url(session)
            return self._send(status, "application/json", json.dumps(body).encode())
        name = "index.html" if parts.path == "/" else parts.path.removeprefix("/web/")
        if parts.path not in ("/", f"/web/{name}") or name not in _PAGE_FILES:
            return self._send(404, "text/plain", b"not found")
        return self._send(200, _PAGE_FILES[name], (self.server.web_dir / name).read_bytes())

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)


def serve_web(provider: UrlProvider, *, port: int, open_browser: bool, target: str,
              err: IO[str] = sys.stderr) -> None:
    """Serve until Ctrl-C (checks the provider once first, so missing credentials fail early)."""
    try:
        provider(new_session_id())
    except Exception as exc:
        raise describe_error(exc) from None
    server = WebServer(provider, port=port, log=err)
    err.write(f"Voice agent page: {server.url}  (talks to {target}; Ctrl-C stops)\n")
    err.flush()
    if open_browser:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
