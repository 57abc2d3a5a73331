"""Text cut to one readable line: what every log renderer shares.

Also the lines every agent's tool calls come to (`→ bash: pytest -q`, then
`← output`), so that a person reads each agent's log the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

TEXT_LIMIT = 400  # assistant prose: enough to follow its reasoning
DETAIL_LIMIT = 160  # tool arguments and results: one screen line or so


def shorten(text: str, limit: int) -> str:
    """Whitespace runs (newlines too) become one space; long text ends in '…'."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def tool_call(name: str, args: Mapping[str, Any], keys: Mapping[str, str]) -> str:
    """`→ name: what` for a tool call: the argument that says what it does
    (`keys[name]`, where it is text), else every argument as JSON, cut to a line."""
    key = keys.get(name)
    said = args.get(key) if key else None
    if not isinstance(said, str):
        said = json.dumps(args, ensure_ascii=False, sort_keys=True) if args else ""
    return f"→ {name}: {shorten(said, DETAIL_LIMIT)}".rstrip(": ")


def tool_output(out: str) -> str:
    """`← output` for what a tool gave back (already cut), or that it gave nothing."""
    return f"← {out}" if out else "← (no output)"
