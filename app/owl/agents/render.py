"""Claude's stream-json, one event per line, as short lines a person can read
(Codex's, Gemini's, OpenCode's, Copilot's and pi's events too: `render_codex`,
`render_gemini`, `render_opencode`, `render_copilot`, `render_pi`).

The raw log keeps every event; this is only the view (`owl logs`, the tray).
It is pure (a line in, text out) so it can be tested on lines captured from
the real CLI, and it never raises on odd input: an event it does not know is
skipped, and a line that is not JSON is shown as is (stderr, a crash trace,
an agent that does not speak stream-json).

    system/init        ● claude 2.1.3, model claude-x, in /path
    assistant text     the text, on one line
    assistant tool_use → Bash: pytest -q
    user tool_result   ← output (first line)   /   ✗ error text
    result             ✓ result: ...           /   ✗ result (error_max_turns): ...
"""

from __future__ import annotations

import json
from typing import Any

from owl.agents import render_codex, render_copilot, render_gemini, render_opencode, render_pi
from owl.agents.textcut import DETAIL_LIMIT, TEXT_LIMIT, shorten, tool_output

__all__ = ["DETAIL_LIMIT", "TEXT_LIMIT", "render_line", "shorten"]

# The argument that says what a tool call does, per tool.
_TOOL_KEY = {
    "Bash": "command",
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
    "Glob": "pattern",
    "Grep": "pattern",
    "WebFetch": "url",
    "WebSearch": "query",
    "Task": "description",
    "Agent": "description",
    "Skill": "skill",
}


def render_line(line: str) -> str | None:
    """One line of the agent's stdout -> readable text, or None to skip it."""
    stripped = line.rstrip("\r\n")
    if not stripped.strip():
        return None
    try:
        event = json.loads(stripped)
    except ValueError:
        return stripped
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return stripped
    try:
        return _render(event)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError):
        # A shape this version does not know: skip it rather than break the log.
        return None


def _render(event: dict[str, Any]) -> str | None:
    kind = event["type"]
    other = _other(event)
    if other is not None:
        return other(event)
    if kind == "system":
        return _system(event)
    if kind == "assistant":
        return _join(_assistant_block(b) for b in _content(event))
    if kind == "user":
        return _join(_tool_result(b) for b in _content(event))
    if kind == "result":
        return _result(event)
    return None  # stream_event, rate-limit notices and the like


def _other(event: dict[str, Any]) -> Any:
    """The renderer of another CLI's events, when `event` is one of theirs."""
    kind = event["type"]
    if render_pi.is_pi(event):
        return render_pi.render
    if render_opencode.is_opencode(event):
        return render_opencode.render
    if render_copilot.is_copilot(event):
        return render_copilot.render
    if kind in render_codex.KINDS or (kind == "error" and "severity" not in event):
        return render_codex.render
    if kind in render_gemini.KINDS or kind == "error" or render_gemini.is_gemini_result(event):
        return render_gemini.render
    return None


def _join(parts: Any) -> str | None:
    lines = [p for p in parts if p]
    return "\n".join(lines) if lines else None


def _content(event: dict[str, Any]) -> list[dict[str, Any]]:
    content = (event.get("message") or {}).get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _system(event: dict[str, Any]) -> str | None:
    sub = event.get("subtype")
    if sub == "init":
        bits = ["● claude"]
        if event.get("claude_code_version"):
            bits.append(str(event["claude_code_version"]))
        line = " ".join(bits)
        if event.get("model"):
            line += f", model {event['model']}"
        if event.get("cwd"):
            line += f", in {event['cwd']}"
        return line
    if sub == "compact_boundary":
        return "● context compacted"
    return None


def _assistant_block(block: dict[str, Any]) -> str | None:
    kind = block.get("type")
    if kind == "text":
        text = shorten(block.get("text", ""), TEXT_LIMIT)
        return text or None
    if kind == "tool_use":
        name = str(block.get("name", "?"))
        return f"→ {name}: {_tool_summary(name, block.get('input') or {})}".rstrip(": ")
    return None  # thinking, redacted thinking


def _tool_summary(name: str, args: dict[str, Any]) -> str:
    key = _TOOL_KEY.get(name)
    if key and isinstance(args.get(key), str):
        return shorten(args[key], DETAIL_LIMIT)
    if name == "TodoWrite" and isinstance(args.get("todos"), list):
        todos = args["todos"]
        done = sum(1 for t in todos if isinstance(t, dict) and t.get("status") == "completed")
        return f"{done}/{len(todos)} done"
    if not args:
        return ""
    return shorten(json.dumps(args, ensure_ascii=False, sort_keys=True), DETAIL_LIMIT)


def _tool_result(block: dict[str, Any]) -> str | None:
    if block.get("type") != "tool_result":
        return None  # the user's own text is the prompt, already known
    content = block.get("content")
    if isinstance(content, list):
        content = " ".join(
            str(c.get("text", ""))
            for c in content
            if isinstance(c, dict) and c.get("type") == "text"
        )
    text = shorten(content or "", DETAIL_LIMIT)
    if block.get("is_error"):
        return f"✗ {text}" if text else "✗ (error)"
    return tool_output(text)


def _result(event: dict[str, Any]) -> str:
    sub = event.get("subtype") or ""
    text = event.get("result")
    if not isinstance(text, str) or not text:
        errors = event.get("errors")
        text = "; ".join(map(str, errors)) if isinstance(errors, list) else ""
    stats = []
    if isinstance(event.get("num_turns"), int):
        stats.append(f"{event['num_turns']} turns")
    if isinstance(event.get("duration_ms"), (int, float)):
        stats.append(f"{event['duration_ms'] / 1000:.1f}s")
    if isinstance(event.get("total_cost_usd"), (int, float)):
        stats.append(f"${event['total_cost_usd']:.4f}")
    tail = f" ({', '.join(stats)})" if stats else ""
    if event.get("is_error") or (sub and sub != "success"):
        label = sub if sub and sub != "success" else "error"
        body = f": {shorten(text, DETAIL_LIMIT)}" if text else ""
        return f"✗ result ({label}){body}{tail}"
    return f"✓ result: {shorten(text, DETAIL_LIMIT)}{tail}"
