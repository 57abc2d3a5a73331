"""What an OpenCode Run's `run --format json` lines say happened: the facts `jobrules` decides on.

As measured with OpenCode 1.18.33 against a Chat Completions stub (a provider
with `"npm": "@ai-sdk/openai-compatible"`):

- Every event has `type`, `timestamp` and `sessionID` (`ses_...`): the
  conversation's id is on the first line.
- `step_start` / `step_finish` {part: {reason, tokens: {input, output,
  reasoning, cache: {read, write}}, cost}}: one per model request, its own
  tokens and dollars (from the model's prices in OpenCode's config), so a
  Run's usage is their sum, whatever the session held before.
- `text` {part: {text}}: a finished text part of the assistant's reply;
  `reasoning` likewise (with `--thinking`).
- `tool_use` {part: {tool, state: {status: completed|error, input, output,
  error, metadata: {exit}}}}: a finished tool call.
- `error` {error: {name, data: {message, statusCode, isRetryable,
  responseHeaders, responseBody}}}: the turn failed, exit 1. A 429 or a 5xx
  is first retried by OpenCode itself, 5 times over about 80 s (2, 4, 8, 16,
  30 s, or the provider's `retry-after`, however long), then the error is the
  provider's: "Rate limit reached ... Please try again in 7m12s.", statusCode
  429. OpenCode's own words for some: "Provider is overloaded", "Too Many
  Requests", "Usage limit reached. It will reset in 3 hours 5 minutes."
- `--session ID` of a session it does not know: exit 1, "Error: Session not
  found" on stderr (coloured), no JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from owl.agents import jsonl
from owl.agents.resets import reset_moment
from owl.rules.jobrules import Report

_LIMIT_WORDS = (
    "rate limit",
    "rate_limit",
    "too many requests",
    "usage limit",
    "usagelimit",
    "quota",
    "resource_exhausted",
    "resource exhausted",
)
_USAGE_WORDS = ("usage limit", "usagelimit", "quota", "exhausted")
# The provider's words for its own outage, matched in what OpenCode passes on
# ("internal error" among them: a provider's, never Owl's). They only pick the
# verdict; what Owl says of it is _service()'s own few words (an HTTP status,
# "overloaded", "connection error"), so none of these reads as Owl's.
_SERVICE_WORDS = (
    "overloaded",
    "service unavailable",
    "internal server error",
    "internal error",
    "server error",
    "bad gateway",
    "gateway timeout",
    "unable to connect",
    "connection refused",
    "connection reset",
    "econnrefused",
    "econnreset",
    "socket hang up",
    "socket connection was closed",
    "timed out",
    "etimedout",
    "fetch failed",
    "network error",
)
_RESUME_WORDS = ("session not found",)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RETRY_AFTER_MAX = 8 * 86400  # a longer retry-after is no reset time


def session_in(lines: Iterable[str]) -> str | None:
    """The session id of the first event among `lines`, if any."""
    for _line, event in jsonl.events(lines):
        if event and isinstance(event.get("type"), str) and "sessionID" in event:
            return jsonl.session_id(event.get("sessionID"))
    return None


def read_report(
    lines: Iterable[str], code: int = 0, *, resuming: bool = False, now: float = 0.0
) -> Report:
    """The facts in OpenCode's JSON lines (see the module docstring); never raises."""
    session: str | None = None
    last: str | None = None
    resume_failed: str | None = None
    steps: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    others: set[str] = set()
    for line, event in jsonl.events(lines):
        if event is None:
            plain = _ANSI.sub("", line).strip()
            if resuming and any(w in plain.lower() for w in _RESUME_WORDS):
                resume_failed = plain[:300]
            continue
        sid = jsonl.session_id(event.get("sessionID"))
        if session is None:
            session = sid
        elif sid and sid != session:
            others.add(sid)
        kind = event.get("type")
        part = jsonl.obj(event.get("part"))
        if kind == "text":
            last = (jsonl.text(part.get("text")) or "").strip() or last
        elif kind == "step_finish":
            steps.append(part)
        elif kind == "error":
            errors.append(jsonl.obj(event.get("error")))
    if resume_failed and session is None:
        return Report(resume_failed=resume_failed)
    limit, resets, service, said = _judge(errors, now)
    return Report(
        session_id=session,
        limit=limit,
        resets_at=resets,
        service_error=service,
        usage=_usage(steps) if steps else None,
        last_message=last,
        reset_said=said,
        sessions_ignored=tuple(sorted(others))[:5],
    )


def error_words(error: dict[str, Any]) -> str:
    """What an `error` event says: its data's message, else its name."""
    data = jsonl.obj(error.get("data"))
    return jsonl.text(data.get("message")) or jsonl.text(error.get("name")) or ""


def _judge(
    errors: list[dict[str, Any]], now: float
) -> tuple[str | None, float | None, str | None, str | None]:
    """(limit kind, its reset, service error, what the reset was read from)
    from the Run's errors, the last one first."""
    for error in reversed(errors):
        data = jsonl.obj(error.get("data"))
        status = jsonl.num(data.get("statusCode"))
        words = error_words(error)
        low = words.lower()
        if status == 429 or any(w in low for w in _LIMIT_WORDS):
            kind = "usage" if any(w in low for w in _USAGE_WORDS) else "rate_limit"
            resets, said = _reset(data, words, now)
            return kind, resets, None, said
        if (isinstance(status, (int, float)) and status >= 500) or any(
            w in low for w in _SERVICE_WORDS
        ):
            return None, None, _service(status, low), None
    return None, None, None, None


def _reset(data: dict[str, Any], words: str, now: float) -> tuple[float | None, str | None]:
    """The reset the provider gave: its words, else its `retry-after` header."""
    if not now:
        return None, None
    got = reset_moment(words, now)
    if got is not None:
        return got, words[:200]
    headers = jsonl.obj(data.get("responseHeaders"))
    after = headers.get("retry-after")
    try:
        seconds = float(after) if isinstance(after, str) and len(after) < 32 else None
    except ValueError:
        seconds = None
    if seconds is not None and 0 < seconds <= _RETRY_AFTER_MAX:
        return now + seconds, f"retry-after: {after}"
    return None, None


def _service(status: int | float | None, low: str) -> str:
    if isinstance(status, (int, float)) and not isinstance(status, bool) and status >= 500:
        return f"HTTP {int(status)}"
    if "overloaded" in low:
        return "overloaded"
    return "connection error"


def _usage(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The Run's tokens and dollars: the sum of its steps' own, in the names
    Claude's usage has."""
    total: dict[str, Any] = {
        "input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "output_tokens": 0,
        "num_turns": len(steps),
        "total_cost_usd": None,
    }
    for step in steps:
        tokens = jsonl.obj(step.get("tokens"))
        cache = jsonl.obj(tokens.get("cache"))
        for key, value in (
            ("input_tokens", tokens.get("input")),
            ("cache_read_input_tokens", cache.get("read")),
            ("cache_creation_input_tokens", cache.get("write")),
            ("output_tokens", tokens.get("output")),
            ("output_tokens", tokens.get("reasoning")),
        ):
            n = jsonl.num(value)
            if n is not None and n >= 0:
                total[key] += n
        cost = jsonl.num(step.get("cost"))
        if cost is not None and cost >= 0:
            total["total_cost_usd"] = (total["total_cost_usd"] or 0) + cost
    return total
