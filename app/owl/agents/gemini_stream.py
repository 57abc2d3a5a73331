"""What a Gemini Run's `-o stream-json` lines say happened: the facts `jobrules` decides on.

As measured with Gemini CLI 0.61.0 against a stub of `streamGenerateContent`:

- `init` {session_id, model}: the conversation's id, first line.
- `message` {role, content, delta}: the assistant's words come as deltas.
- `tool_use` {tool_name, tool_id, parameters} / `tool_result` {tool_id,
  status, output, error}.
- `result` {status: success|error, error: {message}, stats: input_tokens,
  output_tokens, total_tokens, cached, duration_ms, tool_calls}; Gemini
  states no dollars.
- A quota error shows only in the final `result` (status error), and the
  exit code is the HTTP status mod 256 (173 for 429, 244 for 500, 247 for
  503): "[API Error: You have exhausted your daily quota on this model.]",
  "... Please retry in 3596s. Suggested retry after 3596s.", or "Your quota
  will reset after 1h49m8s.". A per-minute quota or a 5xx is retried by
  Gemini itself for about 4 minutes first.
- `-r ID` of a session it does not know: exit 42 and "Error resuming
  session: ..." on stderr, no JSON.
"""

from __future__ import annotations

from collections.abc import Iterable

from owl.agents import jsonl
from owl.agents.resets import reset_moment
from owl.rules.jobrules import Report

_LIMIT_WORDS = (
    "quota",
    "resource_exhausted",
    "resource exhausted",
    "rate limit",
    "too many requests",
    "429",
)
_SERVICE_WORDS = (
    "500",
    "502",
    "503",
    "504",
    "internal",
    "unavailable",
    "overloaded",
    "fetch failed",
    "econnrefused",
    "econnreset",
    "socket hang up",
    "timed out",
    "etimedout",
    "network",
)
_RESUME_WORDS = ("error resuming session", "no previous sessions found", "invalid session")
# The exit code is the HTTP status mod 256.
_LIMIT_CODES = {429 % 256}
_SERVICE_CODES = {s % 256 for s in (500, 502, 503, 504)}


def session_in(lines: Iterable[str]) -> str | None:
    """The session id of the first `init` event among `lines`, if any."""
    for _line, event in jsonl.events(lines):
        if event and event.get("type") == "init":
            return jsonl.session_id(event.get("session_id"))
    return None


def read_report(
    lines: Iterable[str], code: int = 0, *, resuming: bool = False, now: float = 0.0
) -> Report:
    """The facts in Gemini's stream-json (see the module docstring); never raises."""
    session = resume_failed = None
    usage: dict | None = None
    words: list[str] = []  # the assistant's message since the last tool call
    last: str | None = None
    errors: list[str] = []
    status = None
    for line, event in jsonl.events(lines):
        if event is None:
            if resuming and any(w in line.lower() for w in _RESUME_WORDS):
                resume_failed = line.strip()[:300]
            continue
        kind = event.get("type")
        if kind == "init":
            session = jsonl.session_id(event.get("session_id")) or session
        elif kind == "message" and event.get("role") == "assistant":
            piece = jsonl.text(event.get("content")) or ""
            words = words + [piece] if event.get("delta") else [piece]
            last = "".join(words).strip() or last
        elif kind == "tool_use":
            words = []
        elif kind == "error":
            errors.append(jsonl.text(event.get("message")) or "")
        elif kind == "result":
            status = jsonl.text(event.get("status"))
            err = event.get("error")
            if isinstance(err, dict):
                errors.append(jsonl.text(err.get("message")) or "")
            elif isinstance(err, str):
                errors.append(err)
            usage = _usage(jsonl.obj(event.get("stats")))
    if resume_failed and session is None:
        return Report(resume_failed=resume_failed)
    limit = resets = service = None
    if status == "error" or code not in (0, None):
        limit, resets, service = _judge(errors, code, now)
    return Report(
        session_id=session,
        limit=limit,
        resets_at=resets,
        service_error=service,
        usage=usage,
        last_message=last,
    )


def _judge(errors: list[str], code: int, now: float) -> tuple[str | None, float | None, str | None]:
    text = " ".join(e for e in errors if e)
    low = text.lower()
    if code in _LIMIT_CODES or any(w in low for w in _LIMIT_WORDS):
        kind = "usage" if ("daily" in low or "quota" in low) else "rate_limit"
        return kind, (reset_moment(text, now) if now else None), None
    if code in _SERVICE_CODES or any(w in low for w in _SERVICE_WORDS):
        status = next((f"HTTP {s}" for s in ("500", "502", "503", "504") if s in low), None)
        if status is None and code in _SERVICE_CODES:
            status = f"HTTP {code + 256}"
        return None, None, status or "connection error"
    return None, None, None


def _usage(stats: dict) -> dict:
    """Gemini's token counts in the names Claude's usage has."""
    return {
        "input_tokens": jsonl.num(stats.get("input_tokens", stats.get("input"))),
        "cache_read_input_tokens": jsonl.num(stats.get("cached")),
        "output_tokens": jsonl.num(stats.get("output_tokens")),
        "total_tokens": jsonl.num(stats.get("total_tokens")),
        "duration_ms": jsonl.num(stats.get("duration_ms")),
        "tool_calls": jsonl.num(stats.get("tool_calls")),
        "total_cost_usd": None,
    }
