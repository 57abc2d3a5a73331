"""Text that came from an agent or a repository, made safe to show.

Pure functions: a log's text in, the agent's own last message (and what its
usage was) out; any string in, the same string with its control characters
made visible. Nothing here does I/O, so the rules are tested on plain strings.

Why control characters matter: the page and the terminal show text an agent
wrote. An escape sequence could repaint a terminal, and a bidirectional
override can make code read differently from what it is, so both are shown
as visible marks instead of being obeyed.
"""

from __future__ import annotations

import json
from typing import Any

TAIL_LINES = 30  # a command agent's "last message": the tail of its log
TAIL_CHARS = 4000
MESSAGE_MAX = 20_000  # a longer last message is cut, with a note


def visible(text: str, *, keep_newlines: bool = True) -> str:
    """`text` with control characters shown, not obeyed, as everywhere else
    Owl shows agent text (`owl.textsafe`): ESC as `\\x1b`, a lone carriage
    return as `\\r`, bidi overrides as `\\u202e`. Newlines and tabs stay when
    keep_newlines; a carriage return before a newline is dropped."""
    from owl import textsafe

    text = text.replace("\r\n", "\n")
    return textsafe.block(text) if keep_newlines else textsafe.line(text)


def _events(log_text: str) -> tuple[list[dict[str, Any]], bool]:
    """The JSON events of a log, and whether any line was JSON at all."""
    events = []
    for line in log_text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            events.append(event)
    return events, bool(events)


def _assistant_text(event: dict[str, Any]) -> str:
    content = (event.get("message") or {}).get("content")
    if isinstance(content, str):
        return content.strip()
    parts = [
        b.get("text", "")
        for b in content or []
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n\n".join(p.strip() for p in parts if p.strip())


def last_message(log_text: str) -> str | None:
    """What the agent said last, from its log.

    stream-json: the `result` event's text, else the last assistant text.
    Anything else (a command agent's plain output): the log's last lines."""
    events, structured = _events(log_text)
    if structured:
        result: str | None = None
        said: str | None = None
        for event in events:
            if (
                event["type"] == "result"
                and isinstance(event.get("result"), str)
                and event["result"].strip()
            ):
                result = event["result"].strip()
            elif event["type"] == "assistant":
                said = _assistant_text(event) or said
        shown = result or said
        return _cut(shown) if shown else None
    lines = [line.rstrip() for line in log_text.splitlines() if line.strip()]
    while lines and lines[0].startswith("owl: "):
        lines.pop(0)  # what Owl said at the top (not contained, ...): not the agent's words
    if not lines:
        return None
    tail = "\n".join(lines[-TAIL_LINES:])
    return tail[-TAIL_CHARS:]


def _cut(text: str) -> str:
    if len(text) <= MESSAGE_MAX:
        return text
    return (
        text[:MESSAGE_MAX].rstrip()
        + f"\n… ({len(text) - MESSAGE_MAX:,} more characters in the log)"
    )


USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def usage_from_log(log_text: str) -> dict[str, Any] | None:
    """The last `result` event's usage (duration, turns, tokens, cost), if any."""
    events, _ = _events(log_text)
    results = [e for e in events if e["type"] == "result"]
    if not results:
        return None
    r = results[-1]
    usage: dict[str, Any] = {}
    for key in ("duration_ms", "num_turns", "total_cost_usd"):
        if isinstance(r.get(key), (int, float)):
            usage[key] = r[key]
    tokens: dict[str, Any] = r["usage"] if isinstance(r.get("usage"), dict) else {}
    for key in USAGE_KEYS:
        if isinstance(tokens.get(key), (int, float)):
            usage[key] = tokens[key]
    source = [e.get("apiKeySource") for e in events if e.get("subtype") == "init"]
    if usage and source and isinstance(source[0], str):  # "none": a subscription's OAuth
        usage["billed"] = source[0] != "none"
    return usage or None


def parse_usage(value: Any) -> dict[str, Any] | None:
    """A stored usage (JSON text or a dict) as a dict, or None."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        try:
            data = json.loads(value)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None
    return None


def parse_list(value: Any) -> list[Any]:
    """A stored JSON list (text or a list) as a list; anything else is empty."""
    if isinstance(value, list):
        return value
    if isinstance(value, str) and value.strip():
        try:
            data = json.loads(value)
        except ValueError:
            return [value]
        return data if isinstance(data, list) else [data]
    return []
