"""What a claude Run's stream-json says happened: the facts `jobrules` decides on.

Read from the Run's log after the agent exits, on the thread that waited for
it (never on the engine thread), as measured with Claude Code 2.1.332:

- `system`/`init` carries the conversation's `session_id` (so does `result`).
- A subscription's usage limit: `rate_limit_event` with `status: rejected`,
  `resetsAt` (epoch) and `rateLimitType` (five_hour, seven_day, ...); then an
  assistant event with `error: rate_limit`, `api_error: usage_limit_reached`
  and the text "You've hit your 5-hour limit · resets 8:10am (UTC)". The
  `allowed` and `allowed_warning` statuses come routinely and are not limits.
- An API key's 429: `error: rate_limit` without `usage_limit_reached`, and
  "API Error: Request rejected (429) · ..." (whose message may carry an older
  "Claude AI usage limit reached|<epoch>").
- The service failing: `api_error_status` 500 or more (529 overloaded), or a
  connection error ("API Error: Connection refused ... (ECONNREFUSED)", with
  `error: server_error` and no status), after the CLI's own retries.
- `result`: `duration_ms`, `num_turns`, `usage`, `total_cost_usd`, and the
  final message in `result`.
- `--resume` of a conversation the CLI cannot find (another directory, a
  transcript gone): a `result` with `errors: ["No conversation found with
  session ID: ..."]`, no `init`, and the same line on stderr.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

from owl.agents.resets import reset_time
from owl.jobrules import Report

HEAD = 256 * 1024            # the init event is within the first lines
TAIL = 2 * 1024 * 1024       # the limit and the result are at the end
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
              "cache_creation_input_tokens")
_RESUME_WORDS = ("No conversation found", "--resume requires")


def read_span(path: Path, offset: int = 0) -> list[str]:
    """The lines written to `path` from `offset` on: its head and tail when it is long.

    A log rotated since `offset` (smaller than it now) is read from its start."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = offset if 0 <= offset <= size else 0
            f.seek(start)
            if size - start <= HEAD + TAIL:
                data = f.read()
            else:
                head = f.read(HEAD)
                f.seek(size - TAIL)
                tail = f.read()
                data = head[: head.rfind(b"\n") + 1] + tail[tail.find(b"\n") + 1:]
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()


def read_head(path: Path, offset: int = 0, limit: int = 64 * 1024) -> list[str]:
    """The first whole lines written to `path` from `offset` on (at most `limit` bytes)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, offset))
            data = f.read(limit)
    except OSError:
        return []
    return data[: data.rfind(b"\n") + 1].decode("utf-8", "replace").splitlines()


def read_report(lines: Iterable[str], *, resuming: bool = False, now: float = 0.0) -> Report:
    """The facts in claude's stream-json lines (see the module docstring)."""
    session = limit = service = resume_failed = last = None
    resets: float | None = None
    usage: dict | None = None
    texts: list[str] = []
    init = False
    for line in lines:
        event = _event(line)
        if event is None:
            if resuming and any(w in line for w in _RESUME_WORDS):
                resume_failed = line.strip()[:300]
            continue
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            init = True
            session = _str(event.get("session_id")) or session
        elif kind == "rate_limit_event":
            info = event.get("rate_limit_info") or {}
            if isinstance(info, dict) and info.get("status") == "rejected":
                limit = _str(info.get("rateLimitType")) or "usage"
                resets = _num(info.get("resetsAt")) or resets
        elif kind == "assistant" and event.get("error"):
            text = _text(event)
            texts.append(text)
            got = _api_error(event, text)
            if got[0] == "limit":
                limit = limit or got[1]
                params = event.get("api_error_params") or {}
                info = params.get("rate_limit_info") if isinstance(params, dict) else None
                if isinstance(info, dict):
                    limit = _str(info.get("rateLimitType")) or limit
                    resets = _num(info.get("resetsAt")) or resets
            elif got[0] == "service":
                service = got[1]
        elif kind == "result":
            session = _str(event.get("session_id")) or session
            usage = _usage(event)
            last = _str(event.get("result")) or last
            errors = " ".join(map(str, event.get("errors") or []))
            if resuming and (any(w in errors for w in _RESUME_WORDS)
                             or (not init and event.get("is_error")
                                 and not event.get("num_turns"))):
                resume_failed = (errors or "the conversation could not be resumed")[:300]
            if event.get("is_error") and limit is None and service is None:
                got = _api_error(event, last or "")
                if got[0] == "limit":
                    limit = got[1]
                elif got[0] == "service":
                    service = got[1]
            if last:
                texts.append(last)
    if limit and resets is None:
        for text in texts:
            resets = reset_time(text, now) if now else None
            if resets:
                break
    return Report(session_id=session if init or not resume_failed else None, limit=limit,
                  resets_at=resets, service_error=service, resume_failed=resume_failed,
                  usage=usage, last_message=last)


def session_in(lines: Iterable[str]) -> str | None:
    """The session id of the first `init` event among `lines`, if any."""
    for line in lines:
        event = _event(line)
        if event and event.get("type") == "system" and event.get("subtype") == "init":
            return _str(event.get("session_id"))
    return None


def _api_error(event: dict[str, Any], text: str) -> tuple[str | None, str | None]:
    """('limit', kind) / ('service', detail) / (None, None) for an error event."""
    status = event.get("api_error_status")
    status = status if isinstance(status, int) else None
    err = event.get("error")
    if event.get("api_error") == "usage_limit_reached":
        return "limit", "usage"
    if err == "rate_limit" or status == 429 or "usage limit reached|" in text:
        return "limit", "rate_limit"
    if status is not None and status >= 500:
        kind = _str(event.get("api_error_type")) or "server error"
        return "service", f"HTTP {status} {kind.replace('_error', '').replace('_', ' ')}"
    low = text.lower()
    if status is None and ("connection error" in low or "econnrefused" in low
                           or "fetch failed" in low or "socket hang up" in low):
        return "service", "connection error"
    if err == "server_error":
        return "service", "server error"
    return None, None


def _usage(event: dict[str, Any]) -> dict[str, Any]:
    u = event.get("usage") if isinstance(event.get("usage"), dict) else {}
    out: dict[str, Any] = {"duration_ms": _num(event.get("duration_ms")),
                           "num_turns": _num(event.get("num_turns"))}
    for key in USAGE_KEYS:
        out[key] = _num(u.get(key))
    out["total_cost_usd"] = _num(event.get("total_cost_usd"))
    return out


# Only lines that carry one of these are parsed: a long Run's log is mostly
# tool calls and their output, which say nothing about how it ended.
_MARKS = re.compile(r'"init"|"rate_limit_event"|"error"|"type": ?"result"')


def _event(line: str) -> dict[str, Any] | None:
    if line.startswith('{"type":"user"') or not _MARKS.search(line):
        return None
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _text(event: dict[str, Any]) -> str:
    content = (event.get("message") or {}).get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or []
                    if isinstance(b, dict) and b.get("type") == "text")


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _num(v: Any) -> Any:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
