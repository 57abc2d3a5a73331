"""The control socket's wire format: one JSON object a line, one request, one reply.

Request:  {"v": 1, "verb": "jobs.show", "args": {"id": 12}}
Reply:    {"v": 1, "ok": true, "data": {...}}
          {"v": 1, "ok": false, "error": "no job 12", "exit": 1}

`v` lets an older `owl` talking to a newer daemon (or the reverse) fail with a
sentence that says so, instead of a wrong answer. This module is imported by
the CLI, so it stays light: json only.
"""

from __future__ import annotations

import json

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERSION = 1
MAX_REQUEST = 1 << 20  # bytes in one request line
MAX_REPLY = 64 << 20
MAX_DEPTH = 8  # objects and lists within one another in a request


class ProtocolError(Exception):
    """A message that is not a request of this protocol; str() is one line."""


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def request(verb: str, args: dict[str, Any] | None = None) -> bytes:
    return encode({"v": VERSION, "verb": verb, "args": args or {}})


def ok(data: Any) -> bytes:
    return encode({"v": VERSION, "ok": True, "data": data})


def error(message: str, exit_code: int = 1) -> bytes:
    return encode({"v": VERSION, "ok": False, "error": message, "exit": exit_code})


def parse_request(line: bytes) -> tuple[str, dict[str, Any]]:
    try:
        msg = json.loads(line.decode("utf-8"))
    except RecursionError:
        raise ProtocolError(f"a request nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("not a JSON request line") from None
    if not isinstance(msg, dict):
        raise ProtocolError("a request is a JSON object")
    if _depth(msg) > MAX_DEPTH:
        raise ProtocolError(f"a request nested deeper than {MAX_DEPTH} levels")
    try:
        # JSON escapes can carry lone surrogates ("\\ud800") that no file,
        # log or database can hold: refuse them here, not deep in a verb.
        json.dumps(msg, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError("the request carries text that is not valid Unicode") from None
    v = msg.get("v")
    if v != VERSION:
        raise ProtocolError(
            f"this daemon speaks protocol {VERSION} and the request is "
            f"protocol {v!r}: restart the daemon with the same Owl as the command"
        )
    verb, args = msg.get("verb"), msg.get("args", {})
    if not isinstance(verb, str) or not isinstance(args, dict):
        raise ProtocolError("a request needs a verb (string) and args (object)")
    return verb, args


def _depth(obj: Any) -> int:
    """How deeply lists and objects nest in `obj` (a request is 1), counted
    without recursion so that no input can exhaust the stack here."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((c, level + 1) for c in children)
    return deepest
