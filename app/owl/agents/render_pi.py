"""pi's `--mode json` events as short lines a person can read (see `render`).

session                 ● pi session 01a2…
message_end (assistant) the text, on one line; its usage (1.2k in, 56 out, $0.0018)
                        / ✗ the provider's error
tool_execution_start    → bash: pytest -q
tool_execution_end      ← output (first line) / ✗ output
auto_retry_start        ● retrying in 2 s (1 of 3): the error
auto_retry_end          ✗ gave up after 3 retries: the error

`message_update` repeats the whole message so far with every delta (the raw
log keeps them); the finished message is shown once, at its end.
"""

from __future__ import annotations

from typing import Any

from owl.agents.jsonl import num, obj
from owl.agents.textcut import DETAIL_LIMIT, TEXT_LIMIT, shorten, tool_call, tool_output

KINDS = frozenset(
    {
        "session",
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "auto_retry_start",
        "auto_retry_end",
        "compaction_start",
        "compaction_end",
        "queue_update",
    }
)

_TOOL_KEY = {
    "bash": "command",
    "read": "path",
    "write": "path",
    "edit": "path",
    "grep": "pattern",
    "find": "pattern",
    "ls": "path",
}


def is_pi(event: dict[str, Any]) -> bool:
    """An event of pi's: one of its kinds (no other agent's stream has them)."""
    return event.get("type") in KINDS


def render(event: dict[str, Any]) -> str | None:
    kind = event["type"]
    if kind == "session":
        return f"● pi session {event.get('id', '?')}"
    if kind == "message_end":
        return _message(obj(event.get("message")))
    if kind == "tool_execution_start":
        return tool_call(str(event.get("toolName", "?")), obj(event.get("args")), _TOOL_KEY)
    if kind == "tool_execution_end":
        out = shorten(_text(obj(event.get("result")).get("content")), DETAIL_LIMIT)
        if event.get("isError"):
            return f"✗ {out}" if out else "✗ (error)"
        return tool_output(out)
    if kind == "auto_retry_start":
        delay = num(event.get("delayMs"))
        wait = f" in {delay / 1000:g} s" if delay is not None else ""
        said = shorten(str(event.get("errorMessage", "")), DETAIL_LIMIT)
        return f"● retrying{wait} ({event.get('attempt', '?')} of {event.get('maxAttempts', '?')}): {said}"
    if kind == "auto_retry_end" and event.get("success") is False:
        said = shorten(str(event.get("finalError", "")), DETAIL_LIMIT)
        return f"✗ gave up after {event.get('attempt', '?')} retries: {said}"
    if kind == "compaction_end":
        return "● context compacted"
    return None


def _message(message: dict[str, Any]) -> str | None:
    if message.get("role") != "assistant":
        return None
    if message.get("stopReason") in ("error", "aborted"):
        said = shorten(str(message.get("errorMessage") or message["stopReason"]), DETAIL_LIMIT)
        return f"✗ {said}"
    text = shorten(_text(message.get("content")), TEXT_LIMIT)
    if message.get("stopReason") == "toolUse":
        return text or None  # the tool's own lines say the rest
    usage = obj(message.get("usage"))
    bits = [f"{_k(usage.get('input'))} in", f"{_k(usage.get('output'))} out"]
    cost = num(obj(usage.get("cost")).get("total"))
    if cost:
        bits.append(f"${cost:.4f}")
    tail = f"✓ turn done ({', '.join(bits)})"
    return f"{text}\n{tail}" if text else tail


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return " ".join(
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


def _k(n: Any) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "?"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(int(n))
