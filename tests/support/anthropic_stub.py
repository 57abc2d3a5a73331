"""A Messages API stub on 127.0.0.1 that plays a script, for the real Claude Code CLI.

Why a stub and not a mock of the CLI: the facts Owl relies on (how the CLI
passes the prompt, that its Bash tool runs in a new session, that SIGTERM ends
it with 143) are the CLI's own behaviour, so the tests run the real binary and
replace only the model behind it.

A *script* is a list of turns. Each request the agent loop makes (one that
offers tools) takes the next turn: `Text("...")` ends the loop, `Bash("cmd")`
(or any `ToolUse`) asks the CLI to run a tool, after which it sends another
request with the tool's result, and `ApiError()` fails the request. When the
script runs out the stub says "Done." and ends the turn. Requests without tools are the CLI's side calls
(titles, topic checks, quota probes); they get a short text reply and do not
consume the script.

Every request is recorded (`stub.requests`: path, headers, parsed body) so a
test can read the prompt and the system prompt exactly as the agent sent them.

    with AnthropicStub([Bash("git commit -am x"), Text("ok")]) as stub:
        subprocess.run(argv, env={**os.environ, **stub.env(home)})
        stub.main_requests()[0].user_texts()
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "claude-stub-1"


@dataclass(frozen=True)
class Text:
    """A turn that answers with text and ends the agent loop."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """A turn that asks the CLI to run one tool with this input."""

    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ApiError:
    """A turn that fails the request with an API error (status 400 is not retried).

    `headers` go on the reply as they are (the rate-limit headers of a 429);
    `times` > 1 answers that many requests in a row the same way, for a CLI
    that retries (a 529 or an API-key 429 is retried, a subscription's
    usage limit is not)."""

    status: int = 400
    message: str = "stub refused this request"
    kind: str = "invalid_request_error"
    headers: tuple[tuple[str, str], ...] = ()
    times: int = 1
    # "{reset}" in the message or a header becomes the epoch second this many
    # seconds after the request arrives (recorded as Request.reset), so a
    # test's reset moment does not depend on how long the CLI took to start
    reset_in: float | None = None


def UsageLimit(
    reset: float | None = None,
    claim: str = "five_hour",
    times: int = 1,
    reset_in: float | None = None,
) -> ApiError:
    """A subscription's usage limit: 429 with the unified rate-limit headers.

    `reset` is the epoch second it resets, or `reset_in` seconds after the
    request (neither leaves the header out)."""
    headers = [
        ("anthropic-ratelimit-unified-status", "rejected"),
        ("anthropic-ratelimit-unified-representative-claim", claim),
    ]
    if reset is not None or reset_in is not None:
        value = "{reset}" if reset_in is not None else str(int(reset or 0))
        headers.append(("anthropic-ratelimit-unified-reset", value))
    return ApiError(429, "rate limited", "rate_limit_error", tuple(headers), times, reset_in)


def RateLimited(
    message: str = "Number of request tokens has exceeded your rate limit",
    times: int = 1,
    reset_in: float | None = None,
) -> ApiError:
    """An API key's 429: a rate_limit_error and no unified headers."""
    return ApiError(429, message, "rate_limit_error", (("retry-after", "0"),), times, reset_in)


def Overloaded(times: int = 1) -> ApiError:
    """The service is overloaded: 529, which the CLI retries."""
    return ApiError(529, "Overloaded", "overloaded_error", (("retry-after", "0"),), times)


def Bash(
    command: str, timeout_ms: int | None = None, description: str = "run a command"
) -> ToolUse:
    """A turn that runs `command` with the CLI's Bash tool."""
    args: dict[str, Any] = {"command": command, "description": description}
    if timeout_ms is not None:
        args["timeout"] = timeout_ms
    return ToolUse("Bash", args)


# A turn is one block, or a tuple of blocks sent as one message
# (e.g. `(Text("Running the tests."), Bash("pytest -q"))`).
Turn = Text | ToolUse | ApiError | tuple


@dataclass
class Request:
    """One request the CLI made, as received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when not JSON
    turn: Turn | None = None  # the script turn it was answered with
    at: float = 0.0  # time.time() when it arrived
    reset: int | None = None  # the reset moment an ApiError(reset_in=...) answered with

    @property
    def has_tools(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("tools"))

    def system_text(self) -> str:
        """The system prompt, joined from its blocks."""
        system = self.body.get("system", "") if isinstance(self.body, dict) else ""
        if isinstance(system, str):
            return system
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))

    def user_texts(self) -> list[str]:
        """Every text block of every user message, in order."""
        out: list[str] = []
        for msg in self.body.get("messages", []) if isinstance(self.body, dict) else []:
            if msg.get("role") != "user":
                continue
            content = msg.get("content")
            if isinstance(content, str):
                out.append(content)
                continue
            for block in content or []:
                if isinstance(block, dict) and block.get("type") == "text":
                    out.append(block.get("text", ""))
        return out

    def tool_uses(self) -> list[dict[str, Any]]:
        """The tool_use blocks of the assistant messages the request carries (its history)."""
        out: list[dict[str, Any]] = []
        for msg in self.body.get("messages", []) if isinstance(self.body, dict) else []:
            content = msg.get("content")
            if msg.get("role") == "assistant" and isinstance(content, list):
                out.extend(
                    b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
                )
        return out

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks the CLI sent back."""
        out: list[dict[str, Any]] = []
        for msg in self.body.get("messages", []) if isinstance(self.body, dict) else []:
            content = msg.get("content")
            if msg.get("role") == "user" and isinstance(content, list):
                out.extend(
                    b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                )
        return out


@dataclass
class _State:
    script: list[Turn]
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[Request] = field(default_factory=list)
    next_turn: int = 0
    repeats: int = 0  # how often the current error turn was answered
    ids: Any = field(default_factory=lambda: itertools.count(1))
    # sent on every answer (Windows); or made for each from the moment it came
    headers: Any = ()
    output_tokens: int = 5  # each answer's output tokens: what the CLI's cost is counted from


def Windows(
    five_hour: tuple[float, float] | None = None,
    seven_day: tuple[float, float] | None = None,
    status: str = "allowed",
) -> tuple[tuple[str, str], ...]:
    """A subscription's unified rate-limit headers as the service sends them on
    every answer: each window's (utilization 0..1, reset epoch second)."""
    out = [("anthropic-ratelimit-unified-status", status)]
    for name, window in (("5h", five_hour), ("7d", seven_day)):
        if window is None:
            continue
        used, reset = window
        out += [
            (f"anthropic-ratelimit-unified-{name}-utilization", f"{used:g}"),
            (f"anthropic-ratelimit-unified-{name}-reset", str(int(reset))),
            (
                f"anthropic-ratelimit-unified-{name}-status",
                "allowed_warning" if used >= 0.75 else "allowed",
            ),
        ]
    return tuple(out)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _blocks(turn: Turn) -> list[Text | ToolUse]:
    return list(turn) if isinstance(turn, tuple) else [turn]  # type: ignore[list-item]


def _stop_reason(blocks: list[Text | ToolUse]) -> str:
    return "tool_use" if any(isinstance(b, ToolUse) for b in blocks) else "end_turn"


def _events(turn: Turn, msg_id: str, model: str, tokens: int = 5) -> list[bytes]:
    """The SSE stream for one turn: message_start … message_stop."""
    start = {
        "type": "message_start",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    }
    out = [_sse("message_start", start)]
    blocks = _blocks(turn)
    for i, b in enumerate(blocks):
        if isinstance(b, Text):
            block: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": b.text}
        else:
            block = {"type": "tool_use", "id": f"toolu_{msg_id}_{i}", "name": b.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(b.input)}
        out += [
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": block},
            ),
            _sse(
                "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
            ),
            _sse("content_block_stop", {"type": "content_block_stop", "index": i}),
        ]
    out += [
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop_reason(blocks), "stop_sequence": None},
                "usage": {"output_tokens": tokens},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return out


def _message(turn: Turn, msg_id: str, model: str, tokens: int = 5) -> dict[str, Any]:
    """The same turn as a non-streaming response."""
    blocks = _blocks(turn)
    content = [
        {"type": "text", "text": b.text}
        if isinstance(b, Text)
        else {"type": "tool_use", "id": f"toolu_{msg_id}_{i}", "name": b.name, "input": b.input}
        for i, b in enumerate(blocks)
    ]
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(blocks),
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": tokens},
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: _State  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass  # keep test output clean; requests are recorded instead

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _json(self, code: int, data: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self, body: Any) -> Request:
        req = Request(self.command, self.path, dict(self.headers.items()), body, at=time.time())
        with self.state.lock:
            self.state.requests.append(req)
        return req

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._record(None)
        self._json(200, {})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        req = self._record(self._read_body())
        path = self.path.split("?", 1)[0]
        if path.endswith("/count_tokens"):
            self._json(200, {"input_tokens": 10})
            return
        if not path.endswith("/v1/messages"):
            self._json(200, {})
            return
        body = req.body if isinstance(req.body, dict) else {}
        with self.state.lock:
            msg_id = f"msg_{next(self.state.ids)}"
            if req.has_tools:
                i = self.state.next_turn
                turn: Turn = self.state.script[i] if i < len(self.state.script) else Text("Done.")
                self.state.repeats += 1
                if not isinstance(turn, ApiError) or self.state.repeats >= turn.times:
                    self.state.next_turn += 1
                    self.state.repeats = 0
            else:
                turn = Text("ok")
            req.turn = turn
            always, tokens = self.state.headers, self.state.output_tokens
            if callable(always):
                always = always(req.at)
        model = body.get("model") or MODEL
        if isinstance(turn, ApiError):
            message, headers = turn.message, turn.headers
            if turn.reset_in is not None:
                req.reset = int(req.at + turn.reset_in) + 1
                message = message.replace("{reset}", str(req.reset))
                headers = tuple((k, v.replace("{reset}", str(req.reset))) for k, v in headers)
            self._json(
                turn.status,
                {"type": "error", "error": {"type": turn.kind, "message": message}},
                headers,
            )
            return
        if not body.get("stream"):
            self._json(200, _message(turn, msg_id, model, tokens), always)
            return
        self.send_response(200)
        for name, value in always:
            self.send_header(name, value)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in _events(turn, msg_id, model, tokens):
            self.wfile.write(chunk)
            self.wfile.flush()


class AnthropicStub:
    """The stub server; a context manager that serves on a random local port."""

    def __init__(self, script: list[Turn] | None = None) -> None:
        self._state = _State(list(script or []))
        handler = type("Handler", (_Handler,), {"state": self._state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="anthropic-stub", daemon=True
        )

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    @property
    def requests(self) -> list[Request]:
        with self._state.lock:
            return list(self._state.requests)

    def main_requests(self) -> list[Request]:
        """The agent loop's requests (those offering tools), in order."""
        return [
            r
            for r in self.requests
            if r.path.split("?")[0].endswith("/v1/messages") and r.has_tools
        ]

    def answer_with(self, headers: Any = None, output_tokens: int | None = None) -> None:
        """From now on every answer carries `headers` (see `Windows`; or a function
        of the request's arrival, epoch seconds, that makes them) and counts
        `output_tokens` (what the CLI's `total_cost_usd` is worked out from)."""
        with self._state.lock:
            if headers is not None:
                self._state.headers = headers
            if output_tokens is not None:
                self._state.output_tokens = output_tokens

    @property
    def turns_served(self) -> int:
        with self._state.lock:
            return self._state.next_turn

    def env(self, home: Path, oauth: bool = False) -> dict[str, str]:
        """What the CLI needs to talk to this stub, offline, with a throwaway HOME.

        `oauth` signs in as a subscription (CLAUDE_CODE_OAUTH_TOKEN) instead
        of with an API key: the CLI then reads the unified rate-limit headers."""
        auth = (
            {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-test"}
            if oauth
            else {"ANTHROPIC_API_KEY": "test"}
        )
        return {
            "ANTHROPIC_BASE_URL": self.url,
            **auth,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "NO_COLOR": "1",
        }

    def start(self) -> AnthropicStub:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> AnthropicStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
