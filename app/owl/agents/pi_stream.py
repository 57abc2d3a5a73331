"""What a pi Run's `--mode json` lines say happened: the facts `jobrules` decides on.

As measured with pi (npm `@mariozechner/pi-coding-agent`) 0.73.1 against a
Chat Completions stub (a provider in `~/.pi/agent/models.json` with `"api":
"openai-completions"`):

- The first line is the session's header, `session` {id (a UUID), cwd}: the
  conversation's id, which `--session ID` carries on.
- `message_end` {message: {role, content, usage, stopReason, errorMessage}}
  ends each message; an assistant's has its own `usage` {input, output,
  cacheRead, cacheWrite, cost: {total}} (dollars, from the model's prices in
  models.json), so a Run's usage is the sum over its assistant messages,
  whatever the session held before. `message_update` events repeat the
  message so far with every delta: the log view skips them.
- A request the provider refused ends an assistant message with `stopReason:
  "error"` and `errorMessage` "429 Rate limit reached ... Please try again in
  7m12s." (the provider SDK's form: the HTTP status, then the provider's
  message). pi retries it itself (`auto_retry_start` {attempt, delayMs},
  3 times from 2 s, doubling) and then gives up with `auto_retry_end`
  {success: false, finalError} — and exits 0: the Run did not succeed all
  the same (`Report.gave_up`).
- `tool_execution_end` {toolName, result: {content}, isError}: a finished tool call.
- `--session ID` of a session it does not know starts a new one under that
  id: nothing to read as a failed resume.

The limit is read from the structured message first: the status at the head
of the error (429: a limit; 5xx: the service), then the provider's words as
the bounded fallback (`opencode_stream`'s lists); the reset from the
provider's words ("try again in 7m12s"), the only place pi passes it on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from owl.agents import jsonl
from owl.agents.resets import reset_moment
from owl.rules.jobrules import Report

# The provider's words, read only where its error carries no status (a
# connection that failed, an SDK that words it its own way); bounded: only the
# last assistant message's error is read.
_LIMIT_WORDS = ("rate limit", "rate_limit", "too many requests", "usage limit", "quota")
_USAGE_WORDS = ("usage limit", "quota", "exhausted")
_SERVICE_WORDS = (
    "overloaded",
    "service unavailable",
    "server error",
    "connection error",
    "connection refused",
    "econnrefused",
    "econnreset",
    "socket hang up",
    "fetch failed",
    "timed out",
    "network error",
)
_STATUS = re.compile(r"\s*(\d{3})\b")  # "429 Rate limit reached ...": the SDK's status first
WORDS_MAX = 300


def session_in(lines: Iterable[str]) -> str | None:
    """The id of the session header among `lines`, if any."""
    for _line, event in jsonl.events(lines):
        if event and event.get("type") == "session":
            return jsonl.session_id(event.get("id"))
    return None


def read_report(
    lines: Iterable[str], code: int = 0, *, resuming: bool = False, now: float = 0.0
) -> Report:
    """The facts in pi's JSON lines (see the module docstring); never raises."""
    session: str | None = None
    others: set[str] = set()
    messages: list[dict[str, Any]] = []
    gave_up: str | None = None
    for _line, event in jsonl.events(lines):
        if event is None:
            continue
        kind = event.get("type")
        if kind == "session":
            sid = jsonl.session_id(event.get("id"))
            if session is None:
                session = sid
            elif sid and sid != session:
                others.add(sid)
        elif kind == "message_end":
            message = jsonl.obj(event.get("message"))
            if message.get("role") == "assistant":
                messages.append(message)
        elif kind == "auto_retry_end" and event.get("success") is False:
            gave_up = jsonl.text(event.get("finalError")) or "its retries ran out"
    last = messages[-1] if messages else {}
    failed = last.get("stopReason") in ("error", "aborted")
    error = (jsonl.text(last.get("errorMessage")) or gave_up or "") if failed else ""
    limit, resets, service, said = _judge(error, now) if failed else (None, None, None, None)
    return Report(
        session_id=session,
        limit=limit,
        resets_at=resets,
        service_error=service,
        usage=_usage(messages) if messages else None,
        last_message=_last_text(messages),
        reset_said=said,
        gave_up=(" ".join(error.split())[:WORDS_MAX] or "its request failed") if failed else None,
        sessions_ignored=tuple(sorted(others))[:5],
    )


def status_of(error: str) -> int | None:
    """The HTTP status at the head of a provider error ("429 Rate limit ..."), or None."""
    m = _STATUS.match(error[:8])
    return int(m.group(1)) if m else None


def _judge(error: str, now: float) -> tuple[str | None, float | None, str | None, str | None]:
    """(limit kind, its reset, service error, what the reset was read from)."""
    status = status_of(error)
    low = error.lower()
    if status == 429 or (status is None and any(w in low for w in _LIMIT_WORDS)):
        kind = "usage" if any(w in low for w in _USAGE_WORDS) else "rate_limit"
        got = reset_moment(error, now) if now else None
        return kind, got, None, error[:200] if got is not None else None
    if status is not None and status >= 500:
        return None, None, f"HTTP {status}", None
    if status is None and any(w in low for w in _SERVICE_WORDS):
        return None, None, "overloaded" if "overloaded" in low else "connection error", None
    return None, None, None, None


def _last_text(messages: list[dict[str, Any]]) -> str | None:
    """The text of the last assistant message that has some."""
    for message in reversed(messages):
        content = message.get("content")
        parts = (
            [
                jsonl.text(b.get("text")) or ""
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            ]
            if isinstance(content, list)
            else []
        )
        said = "".join(parts).strip()
        if said:
            return said
    return None


def _usage(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The Run's tokens and dollars: the sum of its assistant messages' own, in
    the names Claude's usage has."""
    total: dict[str, Any] = {
        "input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "output_tokens": 0,
        "num_turns": len(messages),
        "total_cost_usd": None,
    }
    for message in messages:
        usage = jsonl.obj(message.get("usage"))
        for key, value in (
            ("input_tokens", usage.get("input")),
            ("cache_read_input_tokens", usage.get("cacheRead")),
            ("cache_creation_input_tokens", usage.get("cacheWrite")),
            ("output_tokens", usage.get("output")),
        ):
            n = jsonl.num(value)
            if n is not None and n >= 0:
                total[key] += n
        cost = jsonl.num(jsonl.obj(usage.get("cost")).get("total"))
        if cost is not None and cost >= 0:
            total["total_cost_usd"] = (total["total_cost_usd"] or 0) + cost
    return total
