"""What the model-API stubs for Codex and Gemini share: a local server playing a script.

Like `anthropic_stub`: a script is a list of turns, each model request the
CLI's agent loop makes takes the next one (`Say` ends the loop, `Shell` asks
the CLI to run a command, `Fail` answers with an HTTP error, `times` requests
in a row), and when the script runs out the stub says "Done.". Every request
is recorded (`stub.requests`) so a test can read what the CLI sent — the
whole earlier conversation a resumed Run re-sends, for one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Say:
    """A turn that answers with text and ends the agent loop; `over` > 0
    streams it a word at a time over that many seconds (a slow model, to
    freeze a Run mid-stream)."""

    text: str
    over: float = 0.0


def words(text: str) -> list[str]:
    """`text` in pieces that join back to it, a word each."""
    pieces = [w + " " for w in text.split(" ")]
    pieces[-1] = pieces[-1][:-1]
    return [p for p in pieces if p]


@dataclass(frozen=True)
class Shell:
    """A turn that asks the CLI to run one shell command."""

    command: str


@dataclass(frozen=True)
class Fail:
    """A turn that fails the request: `status` with JSON `body` ("{reset}" in
    any string of it becomes the epoch second `reset_in` seconds after the
    request arrived, recorded as Request.reset)."""

    status: int
    body: dict[str, Any]
    times: int = 1
    reset_in: float | None = None
    headers: tuple[tuple[str, str], ...] = ()  # more response headers (retry-after)


Turn = Say | Shell | Fail


@dataclass
class Request:
    method: str
    path: str
    body: Any
    at: float
    turn: Turn | None = None
    reset: int | None = None

    def text(self) -> str:
        """The whole body as text, to look for what an earlier turn said."""
        return json.dumps(self.body) if not isinstance(self.body, str) else self.body


@dataclass
class _State:
    script: list[Turn]
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[Request] = field(default_factory=list)
    next_turn: int = 0
    repeats: int = 0
    headers: tuple[tuple[str, str], ...] = ()  # sent with every streamed answer


def _fill(value: Any, reset: int) -> Any:
    if value == "{reset}":
        return reset
    if isinstance(value, str):
        return value.replace("{reset}", str(reset))
    if isinstance(value, dict):
        return {k: _fill(v, reset) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, reset) for v in value]
    return value


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: _State
    # (request) -> True when it is one of the agent loop's turns
    is_turn: Callable[[Request], bool]
    # (handler, request) -> answer a request that is not a turn
    side: Callable[[Any, Request], None]
    # (handler, request, turn) -> answer with a turn's stream
    play: Callable[[Any, Request, Turn], None]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_json(self, code: int, data: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_sse(self, chunks: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        with self.state.lock:
            extra = self.state.headers
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    def send_sse_slowly(
        self, head: list[bytes], pieces: list[bytes], tail: list[bytes], over: float
    ) -> None:
        """`head`, then `pieces` spread evenly over `over` seconds, then `tail`;
        a client gone (a Run killed) ends it quietly."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        gap = over / max(1, len(pieces))
        try:
            for chunk in head:
                self.wfile.write(chunk)
            self.wfile.flush()
            for chunk in pieces:
                time.sleep(gap)
                self.wfile.write(chunk)
                self.wfile.flush()
            for chunk in tail:
                self.wfile.write(chunk)
            self.wfile.flush()
        except OSError:
            pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _handle(self, body: Any) -> None:
        req = Request(self.command, self.path, body, time.time())
        with self.state.lock:
            self.state.requests.append(req)
        if not type(self).is_turn(req):
            type(self).side(self, req)
            return
        with self.state.lock:
            i = self.state.next_turn
            turn: Turn = self.state.script[i] if i < len(self.state.script) else Say("Done.")
            self.state.repeats += 1
            if not isinstance(turn, Fail) or self.state.repeats >= turn.times:
                self.state.next_turn += 1
                self.state.repeats = 0
            req.turn = turn
        if isinstance(turn, Fail):
            body = turn.body
            if turn.reset_in is not None:
                req.reset = int(req.at + turn.reset_in) + 1
                body = _fill(body, req.reset)
            self.send_json(turn.status, body, turn.headers)
            return
        type(self).play(self, req, turn)

    def do_GET(self) -> None:
        self._handle(None)

    def do_POST(self) -> None:
        self._handle(self._body())


class Stub:
    """Serves on a random local port; a context manager."""

    handler: type[Handler]

    def __init__(self, script: list[Turn] | None = None) -> None:
        self._state = _State(list(script or []))
        handler = type("H", (self.handler,), {"state": self._state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name=type(self).__name__
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[Request]:
        with self._state.lock:
            return list(self._state.requests)

    def turns(self) -> list[Request]:
        """The agent loop's requests, in order."""
        return [r for r in self.requests if r.turn is not None]

    def extend(self, turns: list[Turn]) -> None:
        """More turns at the end of the script (for the next Run)."""
        with self._state.lock:
            self._state.script.extend(turns)

    def answer_with(self, headers: tuple[tuple[str, str], ...]) -> None:
        """From now on every streamed answer carries `headers` (a service's rate-limit
        headers, say)."""
        with self._state.lock:
            self._state.headers = tuple(headers)

    @property
    def turns_served(self) -> int:
        with self._state.lock:
            return self._state.next_turn

    def __enter__(self) -> Stub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
