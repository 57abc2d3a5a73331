"""Copilot CLI's `--output-format json` events as short lines a person can read (see `render`).

assistant.message        the text, on one line
tool.execution_start     → bash: pytest -q
tool.execution_complete  ← output (first line)  /  ✗ exit 1: output
session.error            ✗ HTTP 429: the message
result                   ✓ result (session 1b2c…, 1 premium request, 12.3s) / ✗ result (exit 1)
"""

from __future__ import annotations

from typing import Any

from owl.agents.jsonl import num, obj
from owl.agents.textcut import DETAIL_LIMIT, TEXT_LIMIT, shorten, tool_call, tool_output

# Ephemeral events (deltas, background tasks, model calls) stay in the raw log.
KINDS = frozenset(
    {
        "assistant.message",
        "tool.execution_start",
        "tool.execution_complete",
        "session.error",
        "user.message",
    }
)

_TOOL_KEY = {"bash": "command", "view": "path", "create": "path", "edit": "path"}


def is_copilot(event: dict[str, Any]) -> bool:
    """An event of Copilot's: a dotted type with `data`, or its `result` line."""
    kind = event.get("type")
    if kind == "result":
        return "sessionId" in event and "exitCode" in event
    return kind in KINDS and "data" in event


def render(event: dict[str, Any]) -> str | None:
    kind = event["type"]
    data = obj(event.get("data"))
    if kind == "assistant.message":
        return shorten(str(data.get("content") or ""), TEXT_LIMIT) or None
    if kind == "tool.execution_start":
        return tool_call(str(data.get("toolName", "?")), obj(data.get("arguments")), _TOOL_KEY)
    if kind == "tool.execution_complete":
        out = shorten(str(obj(data.get("result")).get("content") or ""), DETAIL_LIMIT)
        code = obj(data.get("shellExecution")).get("exitCode")
        if isinstance(code, int) and code != 0:
            return f"✗ exit {code}: {out}" if out else f"✗ exit {code}"
        if data.get("success") is False:
            return f"✗ {out}" if out else "✗ (tool failed)"
        return tool_output(out)
    if kind == "session.error":
        status = data.get("statusCode")
        head = f"✗ HTTP {status}: " if isinstance(status, int) else "✗ "
        return head + shorten(str(data.get("message") or data.get("errorType") or ""), DETAIL_LIMIT)
    if kind == "result":
        return _result(event)
    return None  # the prompt itself (user.message): already known


def _result(event: dict[str, Any]) -> str:
    usage = obj(event.get("usage"))
    bits = [f"session {event.get('sessionId', '?')}"]
    premium = num(usage.get("premiumRequests"))
    if premium is not None:
        bits.append(f"{premium:g} premium request{'' if premium == 1 else 's'}")
    took = num(usage.get("sessionDurationMs"))
    if took is not None:
        bits.append(f"{took / 1000:.1f}s")
    code = event.get("exitCode")
    if isinstance(code, int) and code != 0:
        return f"✗ result (exit {code}; {', '.join(bits)})"
    return f"✓ result ({', '.join(bits)})"
