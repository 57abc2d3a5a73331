"""What a Codex Run's `exec --json` lines say happened: the facts `jobrules` decides on.

As measured with Codex CLI 0.171.0 against a Responses API stub:

- `thread.started` {thread_id}: the conversation's id (a UUID), first line.
- `item.started` / `item.completed` {item: {type, ...}}: `agent_message`
  {text}, `command_execution` {command, aggregated_output, exit_code},
  `reasoning`, `file_change`, `error` {message}, and others.
- `turn.completed` {usage: input_tokens, cached_input_tokens, output_tokens},
  cumulative over the thread; Codex states no dollars.
- A failed turn: `error` {message} then `turn.failed` {error: {message}}, exit 1.
  A usage limit (HTTP 429 `usage_limit_reached`) is not retried: "You've hit
  your usage limit. ... try again at 7:57 PM." (or "Try again at Dec 4th,
  2026 6:27 PM."); "Quota exceeded. Check your plan and billing details." is
  `insufficient_quota` (no reset moment). A plain 429 or a 5xx is retried by
  Codex first (about 25 s), then "Reconnecting... 5/5 (...)" and the turn fails:
  those are the service failing (a 5xx reads "We're currently experiencing
  high demand, which may cause temporary errors.").
- The structured facts are not in these lines but in the thread's rollout
  (`codex_rollout`): a failed turn's `codex_error_info`
  (`usage_limit_exceeded`, `server_overloaded`, ...) and the plan's
  rate-limit snapshot (`primary`/`secondary` {used_percent, resets_at}).
  `with_info` reads them first; the words here are the fallback.
- `exec resume` of a thread it does not know: no JSON at all, and on stderr
  "Error: thread/resume: thread/resume failed: no rollout found for thread id ...".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from owl.agents import jsonl
from owl.agents.resets import reset_moment
from owl.rules.budget import Reading
from owl.rules.jobrules import Report

_LIMIT_WORDS = ("usage limit", "usage_limit_reached", "quota exceeded", "insufficient_quota")
_SERVICE_WORDS = (
    "high demand",
    "reconnecting",
    "stream disconnected",
    "stream closed",
    "error sending request",
    "connection refused",
    "connection reset",
    "timed out",
    "overloaded",
    "server error",
    "internal server error",
    "service unavailable",
    "bad gateway",
    " 500",
    " 502",
    " 503",
    " 504",
    " 529",
    "too many requests",
    "429",
)
_RESUME_WORDS = ("no rollout found", "thread/resume failed", "thread not found")


def session_in(lines: Iterable[str]) -> str | None:
    """The thread id of the first `thread.started` among `lines`, if any."""
    for _line, event in jsonl.events(lines):
        if event and event.get("type") == "thread.started":
            return jsonl.session_id(event.get("thread_id"))
    return None


def read_report(lines: Iterable[str], *, resuming: bool = False, now: float = 0.0) -> Report:
    """The facts in Codex's JSONL (see the module docstring); never raises on odd lines."""
    session = last = resume_failed = None
    usage: dict | None = None
    errors: list[str] = []
    failed = False
    turns = 0
    for line, event in jsonl.events(lines):
        if event is None:
            low = line.lower()
            if resuming and any(w in low for w in _RESUME_WORDS):
                resume_failed = line.strip()[:300]
            elif line.startswith("Error:"):
                errors.append(line.strip())
            continue
        kind = event.get("type")
        if kind == "thread.started":
            session = jsonl.session_id(event.get("thread_id")) or session
        elif kind == "item.completed":
            item = jsonl.obj(event.get("item"))
            if item.get("type") == "agent_message":
                last = jsonl.text(item.get("text")) or last
            elif item.get("type") == "error":
                errors.append(jsonl.text(item.get("message")) or "")
        elif kind == "turn.completed":
            turns += 1
            usage = _usage(jsonl.obj(event.get("usage")), turns)
        elif kind == "error":
            errors.append(jsonl.text(event.get("message")) or "")
        elif kind == "turn.failed":
            failed = True
            errors.append(jsonl.text(jsonl.obj(event.get("error")).get("message")) or "")
    limit, resets, service = _judge_errors(errors, failed, now)
    if resume_failed and session is None:
        return Report(resume_failed=resume_failed)
    return Report(
        session_id=session,
        limit=limit,
        resets_at=resets,
        service_error=service,
        usage=usage,
        last_message=last,
    )


def _judge_errors(
    errors: list[str], failed: bool, now: float
) -> tuple[str | None, float | None, str | None]:
    """(limit kind, its reset, service error) from the turn's error messages."""
    if not failed and not any(e.startswith("Error:") for e in errors):
        return None, None, None
    for message in reversed(errors):
        low = message.lower()
        if any(w in low for w in _LIMIT_WORDS):
            return "usage", (reset_moment(message, now) if now else None), None
    for message in reversed(errors):
        low = " " + message.lower()
        if any(w in low for w in _SERVICE_WORDS):
            return None, None, _service_words(message)
    return None, None, None


# What Codex's own `codex_error_info` (in the rollout, see `codex_rollout.error_info`)
# says a failed turn met: the usage limit, or its model's service failing.
LIMIT_INFO = ("usage_limit_exceeded",)
SERVICE_INFO = (
    "server_overloaded",
    "internal_server_error",
    "http_connection_failed",
    "response_stream_connection_failed",
    "response_stream_disconnected",
    "response_too_many_failed_attempts",
)


def with_info(rep: Report, info: tuple[str, int | None] | None, windows: list[Reading]) -> Report:
    """`rep` (read from the words) corrected by Codex's structured facts: its
    `codex_error_info` decides limit or service first, and the reset is the
    exhausted window's `resets_at` from its rate-limit snapshot where it gave
    one; the words stay as the fallback (no info, or a reset only they say)."""
    if info is None or rep.resume_failed:
        return rep
    name, status = info
    if name in LIMIT_INFO:
        spent = [w for w in windows if w.used >= 1.0 and math.isfinite(w.resets_at)]
        if spent:
            reset = max(w.resets_at for w in spent)
            said = f"codex_error_info {name}, rate_limits resets_at {reset:.0f}"
            return replace(rep, limit="usage", resets_at=reset, service_error=None, reset_said=said)
        return replace(rep, limit="usage", service_error=None)
    if name in SERVICE_INFO and rep.limit is None:
        if status == 429:
            return replace(rep, service_error="HTTP 429 rate limited")
        words = f"HTTP {status}" if status else name.replace("_", " ")
        return replace(rep, service_error=rep.service_error or words)
    return rep


def _service_words(message: str) -> str:
    low = message.lower()
    for status in ("500", "502", "503", "504", "529"):
        if status in low:
            return f"HTTP {status}"
    if "429" in low or "too many requests" in low:
        return "HTTP 429 rate limited"
    if "overloaded" in low or "high demand" in low:
        return "overloaded"
    return "connection error"


THREAD_KEYS = ("input_tokens", "cache_read_input_tokens", "output_tokens")


def _usage(u: dict, turns: int) -> dict:
    """Codex's token counts in the names Claude's usage has. They are the
    thread's so far (a resumed thread counts its earlier Runs too), kept as
    `thread` so `per_run` can take the earlier Run's off."""
    counts = {
        "input_tokens": jsonl.num(u.get("input_tokens")),
        "cache_read_input_tokens": jsonl.num(u.get("cached_input_tokens")),
        "output_tokens": jsonl.num(u.get("output_tokens")),
    }
    return {**counts, "num_turns": turns, "total_cost_usd": None, "thread": dict(counts)}


def per_run(usage: dict, earlier: dict | None) -> dict:
    """`usage` less what the same thread had counted by an earlier Run's end."""
    before = earlier.get("thread") if isinstance(earlier, dict) else None
    if not isinstance(before, dict):
        return usage
    out = dict(usage)
    for key in THREAD_KEYS:
        now_, then = usage.get(key), before.get(key)
        if isinstance(now_, (int, float)) and isinstance(then, (int, float)) and now_ >= then:
            out[key] = now_ - then
    return out
