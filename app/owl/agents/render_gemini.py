"""Gemini's `-o stream-json` events as short lines a person can read (see `render`).

init         ● gemini, model gemini-2.5-pro, session 1b2c…
message      the assistant's words (each delta as it came)
tool_use     → run_shell_command: pytest -q
tool_result  ← output (first line)  /  ✗ error text
result       ✓ result (3 tool calls, 12.3s, 4.5k tokens)  /  ✗ result: the error
"""

from __future__ import annotations

from typing import Any

from owl.agents.jsonl import obj
from owl.agents.textcut import DETAIL_LIMIT, TEXT_LIMIT, shorten, tool_call, tool_output

KINDS = frozenset({"init", "message", "tool_use", "tool_result"})

_TOOL_KEY = {
    "run_shell_command": "command",
    "read_file": "absolute_path",
    "write_file": "file_path",
    "replace": "file_path",
    "glob": "pattern",
    "search_file_content": "pattern",
    "list_directory": "path",
    "web_fetch": "prompt",
    "google_web_search": "query",
}


def is_gemini_result(event: dict[str, Any]) -> bool:
    """Gemini's `result` (status and stats), not Claude's (subtype and result)."""
    return (
        event.get("type") == "result"
        and "subtype" not in event
        and ("stats" in event or "status" in event)
    )


def render(event: dict[str, Any]) -> str | None:
    kind = event["type"]
    if kind == "init":
        line = "● gemini"
        if event.get("model"):
            line += f", model {event['model']}"
        return line + f", session {event.get('session_id', '?')}"
    if kind == "message":
        if event.get("role") != "assistant":
            return None
        return shorten(str(event.get("content", "")), TEXT_LIMIT) or None
    if kind == "tool_use":
        return tool_call(str(event.get("tool_name", "?")), obj(event.get("parameters")), _TOOL_KEY)
    if kind == "tool_result":
        if event.get("status") == "error":
            err = obj(event.get("error"))
            return (
                f"✗ {shorten(str(err.get('message', '') or event.get('output', '')), DETAIL_LIMIT)}"
            )
        out = shorten(str(event.get("output") or ""), DETAIL_LIMIT)
        return tool_output(out)
    if kind == "error":
        return f"✗ {shorten(str(event.get('message', '')), DETAIL_LIMIT)}"
    if kind == "result":
        return _result(event)
    return None


def _result(event: dict[str, Any]) -> str:
    stats = obj(event.get("stats"))
    bits = []
    if isinstance(stats.get("tool_calls"), int):
        bits.append(f"{stats['tool_calls']} tool calls")
    if isinstance(stats.get("duration_ms"), (int, float)):
        bits.append(f"{stats['duration_ms'] / 1000:.1f}s")
    if isinstance(stats.get("total_tokens"), (int, float)):
        bits.append(f"{stats['total_tokens']} tokens")
    tail = f" ({', '.join(bits)})" if bits else ""
    if event.get("status") == "error":
        err = event.get("error")
        said = err.get("message", "") if isinstance(err, dict) else str(err or "")
        return f"✗ result: {shorten(str(said), DETAIL_LIMIT)}{tail}"
    return f"✓ result{tail}"
