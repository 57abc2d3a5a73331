"""Codex's `exec --json` events as short lines a person can read (see `render`).

thread.started              ● codex thread 0199…
item.completed agent_message  the text, on one line
item.started command_execution  → shell: pytest -q
item.completed command_execution  ← output (first line)  /  ✗ exit 1: output
item.completed file_change  ✎ edited a.py, added b.py
turn.completed              ✓ turn done (12.3k in, 456 out)
error / turn.failed         ✗ the message
"""

from __future__ import annotations

from typing import Any

from owl.agents.jsonl import obj
from owl.agents.textcut import DETAIL_LIMIT, TEXT_LIMIT, shorten, tool_output

KINDS = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    }
)


def render(event: dict[str, Any]) -> str | None:
    kind = event["type"]
    if kind == "thread.started":
        return f"● codex thread {event.get('thread_id', '?')}"
    if kind == "turn.completed":
        u = obj(event.get("usage"))
        return f"✓ turn done ({_k(u.get('input_tokens'))} in, {_k(u.get('output_tokens'))} out)"
    if kind == "turn.failed":
        err = obj(event.get("error"))
        return f"✗ turn failed: {shorten(str(err.get('message', '')), DETAIL_LIMIT)}"
    if kind == "error":
        return f"✗ {shorten(str(event.get('message', '')), DETAIL_LIMIT)}"
    if kind in ("item.started", "item.completed"):
        item = event.get("item")
        return _item(item, kind == "item.started") if isinstance(item, dict) else None
    return None


def _item(item: dict[str, Any], started: bool) -> str | None:
    kind = item.get("type")
    if kind == "command_execution":
        if started:
            return f"→ shell: {shorten(str(item.get('command', '')), DETAIL_LIMIT)}"
        out = shorten(str(item.get("aggregated_output") or ""), DETAIL_LIMIT)
        code = item.get("exit_code")
        if isinstance(code, int) and code != 0:
            return f"✗ exit {code}: {out}" if out else f"✗ exit {code}"
        return tool_output(out)
    if started:
        return None
    if kind == "agent_message":
        return shorten(str(item.get("text", "")), TEXT_LIMIT) or None
    if kind == "file_change":
        changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
        said = ", ".join(f"{c.get('kind', 'changed')} {c.get('path', '?')}" for c in changes)
        return f"✎ {shorten(said, DETAIL_LIMIT)}" if said else None
    if kind == "error":
        return f"✗ {shorten(str(item.get('message', '')), DETAIL_LIMIT)}"
    if kind == "mcp_tool_call":
        return f"→ {item.get('server', '?')}.{item.get('tool', '?')}"
    if kind == "web_search":
        return f"→ web search: {shorten(str(item.get('query', '')), DETAIL_LIMIT)}"
    return None  # reasoning, todo lists: in the raw log


def _k(n: Any) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "?"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(int(n))
