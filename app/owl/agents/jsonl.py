"""Reading an agent's JSON-lines output safely: one event per line, bounded.

Codex's `--json` and Gemini's `-o stream-json` print one JSON object a line,
mixed in the log with whatever else the CLI writes to stderr (warnings, a
backtrace). Anything that is not an object is left to the caller as text, and
nothing here raises on any input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

LINE_MAX = 1024 * 1024  # a longer line is a tool's output, not an event worth parsing

# A conversation id as the CLIs print them (UUIDs); anything else is not
# passed on: it goes on a command line after an option, so it must never
# start with "-" or carry a space, and a hostile stream cannot pick it.
_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def session_id(value: Any) -> str | None:
    """`value` when it has the form of a conversation id, else None."""
    if isinstance(value, str) and _SESSION.fullmatch(value):
        return value
    return None


def parse(line: str) -> dict[str, Any] | None:
    """The JSON object on `line`, or None when it is not one."""
    line = line.strip()
    if not line.startswith("{") or len(line) > LINE_MAX:
        return None
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def events(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """(line, its event or None) for every line."""
    for line in lines:
        yield line, parse(line)


def text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def num(v: Any) -> int | float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}
