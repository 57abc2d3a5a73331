"""What a Copilot CLI Run's `--output-format json` lines say happened: the facts `jobrules` decides on.

As measured with GitHub Copilot CLI 1.0.102 against a Chat Completions stub
(its own provider setting, `COPILOT_PROVIDER_BASE_URL`):

- One event a line, `{type, data, id, timestamp, parentId, ephemeral}`:
  `user.message`, `assistant.turn_start` / `assistant.turn_end`,
  `assistant.message` {content, toolRequests}, `tool.execution_start`
  {toolName, arguments}, `tool.execution_complete` {success, result:
  {content}, shellExecution: {exitCode}}, `session.error` {errorType,
  message, statusCode}, and many ephemeral ones (deltas, background tasks).
- The last line is `result` {sessionId, exitCode, usage: {premiumRequests,
  totalApiDurationMs, sessionDurationMs, codeChanges}}: the session's id (a
  UUID) shows only there; Copilot states no tokens and no dollars.
- A 429 is retried by Copilot itself 5 times (about 60 s), then `session.error`
  {errorType: "rate_limit", statusCode: 429, message: "Failed to get response
  from the AI model; retried 5 times (...) Last error: 429 Rate limit reached
  ... Please try again in 7m12s. ..."}, exit 1.
- GitHub's own limits, in its words (seen in public reports, not run here: they
  need a GitHub account): "402 You have no quota" (`quota_exceeded`, the
  premium requests of the month spent) and "Sorry, you've hit a rate limit
  that restricts the number of Copilot model requests you can make within a
  specific time period. Please try again in 2 hours."
- Not signed in: exit 1, and on stderr, as text: "Error: No authentication
  information found." (a failure, not a wait).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from owl.agents import jsonl
from owl.agents.resets import reset_moment
from owl.rules.jobrules import Report

_LIMIT_WORDS = (
    "rate limit",
    "rate_limit",
    "too many requests",
    "no quota",
    "quota_exceeded",
    "quota exceeded",
    "premium request",
    "credit limit",
)
_USAGE_WORDS = ("quota", "premium request", "credit limit")
_SERVICE_WORDS = (
    "overloaded",
    "service unavailable",
    "internal server error",
    "server error",
    "bad gateway",
    "gateway timeout",
    "econnrefused",
    "econnreset",
    "connection refused",
    "socket hang up",
    "fetch failed",
    "timed out",
    "network error",
)
_RESUME_WORDS = ("no session", "session not found", "could not find session", "not found")


def session_of(lines: Iterable[str]) -> tuple[str | None, bool]:
    """(the session id of the `result` line, whether the CLI took the prompt:
    a `user.message` was written to its session)."""
    session, started = None, False
    for _line, event in jsonl.events(lines):
        if not event:
            continue
        kind = event.get("type")
        if kind == "user.message":
            started = True
        elif kind == "result":
            session = jsonl.session_id(event.get("sessionId")) or session
    return session, started


def read_report(
    lines: Iterable[str],
    code: int = 0,
    *,
    resuming: bool = False,
    now: float = 0.0,
    chosen: str | None = None,
) -> Report:
    """The facts in Copilot's JSON lines (see the module docstring); never raises.
    `chosen`: the session id Owl gave a new session (`--session-id`), taken
    once the CLI has taken the prompt into it when no `result` says one."""
    session: str | None = None
    started = False
    last: str | None = None
    errors: list[dict[str, Any]] = []
    texts: list[str] = []
    usage: dict[str, Any] | None = None
    turns = 0
    for line, event in jsonl.events(lines):
        if event is None:
            if line.strip():
                texts.append(line.strip()[:300])
            continue
        kind = event.get("type")
        data = jsonl.obj(event.get("data"))
        if kind == "user.message":
            started = True
        elif kind == "assistant.turn_start":
            turns += 1
        elif kind == "assistant.message":
            last = (jsonl.text(data.get("content")) or "").strip() or last
        elif kind == "session.error":
            errors.append(data)
        elif kind == "result":
            session = jsonl.session_id(event.get("sessionId")) or session
            usage = _usage(jsonl.obj(event.get("usage")), turns)
    if session is None and started:
        session = jsonl.session_id(chosen)
    if resuming and not started and code != 0:
        said = next((t for t in texts if any(w in t.lower() for w in _RESUME_WORDS)), None)
        if said:
            return Report(resume_failed=said)
    limit, resets, service, said = _judge(errors, now)
    return Report(
        session_id=session,
        limit=limit,
        resets_at=resets,
        service_error=service,
        usage=usage,
        last_message=last,
        reset_said=said,
    )


def _judge(
    errors: list[dict[str, Any]], now: float
) -> tuple[str | None, float | None, str | None, str | None]:
    for error in reversed(errors):
        words = jsonl.text(error.get("message")) or ""
        low = f"{error.get('errorType', '')} {words}".lower()
        status = jsonl.num(error.get("statusCode"))
        if status in (402, 429) or any(w in low for w in _LIMIT_WORDS):
            kind = "usage" if status == 402 or any(w in low for w in _USAGE_WORDS) else "rate_limit"
            resets = reset_moment(words, now) if now else None
            return kind, resets, None, (words[:200] if resets else None)
        if (isinstance(status, (int, float)) and status >= 500) or any(
            w in low for w in _SERVICE_WORDS
        ):
            if isinstance(status, (int, float)) and status >= 500:
                return None, None, f"HTTP {int(status)}", None
            return None, None, "overloaded" if "overloaded" in low else "connection error", None
    return None, None, None, None


def _usage(u: dict[str, Any], turns: int) -> dict[str, Any]:
    """Copilot's own accounting: premium requests and time, no tokens or dollars."""
    return {
        "premium_requests": jsonl.num(u.get("premiumRequests")),
        "api_duration_ms": jsonl.num(u.get("totalApiDurationMs")),
        "duration_ms": jsonl.num(u.get("sessionDurationMs")),
        "num_turns": turns,
        "total_cost_usd": None,
    }
