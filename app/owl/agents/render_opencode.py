"""OpenCode's `run --format json` events as short lines a person can read (see `render`).

step_start (the first)  ● opencode session ses_…
text                    the text, on one line
reasoning               (thinking) the text
tool_use                → bash: pytest -q, then ← output (first line) / ✗ exit 1: output
step_finish             ✓ step done (1.2k in, 56 out, $0.0018) / only at the end: stop
error                   ✗ the provider's message
"""

from __future__ import annotations

from typing import Any

from owl.agents.jsonl import num, obj
from owl.agents.textcut import DETAIL_LIMIT, TEXT_LIMIT, shorten, tool_call, tool_output

KINDS = frozenset({"step_start", "step_finish", "text", "reasoning", "tool_use"})

# The argument that says what a tool call does, per tool.
_TOOL_KEY = {
    "bash": "command",
    "read": "filePath",
    "write": "filePath",
    "edit": "filePath",
    "glob": "pattern",
    "grep": "pattern",
    "webfetch": "url",
    "task": "description",
    "skill": "name",
}


def is_opencode(event: dict[str, Any]) -> bool:
    """An event of OpenCode's: every one carries its session as `sessionID`."""
    return "sessionID" in event and (event.get("type") in KINDS or event.get("type") == "error")


def render(event: dict[str, Any]) -> str | None:
    kind = event["type"]
    part = obj(event.get("part"))
    if kind == "step_start":
        return None
    if kind == "text":
        return shorten(str(part.get("text", "")), TEXT_LIMIT) or None
    if kind == "reasoning":
        said = shorten(str(part.get("text", "")), DETAIL_LIMIT)
        return f"(thinking) {said}" if said else None
    if kind == "tool_use":
        return _tool(part)
    if kind == "step_finish":
        return _step(part)
    if kind == "error":
        error = obj(event.get("error"))
        data = obj(error.get("data"))
        said = data.get("message") or error.get("name") or ""
        status = data.get("statusCode")
        head = f"✗ HTTP {status}: " if isinstance(status, int) else "✗ "
        return head + shorten(str(said), DETAIL_LIMIT)
    return None


def _tool(part: dict[str, Any]) -> str:
    name = str(part.get("tool", "?"))
    state = obj(part.get("state"))
    call = tool_call(name, obj(state.get("input")), _TOOL_KEY)
    if state.get("status") == "error":
        return f"{call}\n✗ {shorten(str(state.get('error', '')), DETAIL_LIMIT)}"
    out = shorten(str(state.get("output") or ""), DETAIL_LIMIT)
    code = obj(state.get("metadata")).get("exit")
    if isinstance(code, int) and code != 0:
        return f"{call}\n✗ exit {code}: {out}" if out else f"{call}\n✗ exit {code}"
    return f"{call}\n{tool_output(out)}"


def _step(part: dict[str, Any]) -> str | None:
    if part.get("reason") == "tool-calls":
        return None  # the tool's own lines said it
    tokens = obj(part.get("tokens"))
    bits = [f"{_k(tokens.get('input'))} in", f"{_k(tokens.get('output'))} out"]
    cost = num(part.get("cost"))
    if cost:
        bits.append(f"${cost:.4f}")
    reason = part.get("reason")
    label = "✓ step done" if reason in (None, "stop") else f"● step ended ({reason})"
    return f"{label} ({', '.join(bits)})"


def _k(n: Any) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "?"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(int(n))
