"""A socket request's arguments, each checked against its type and bounds.

Whatever arrives over the socket is a JSON object of anything: an id of
10^30, `"agent": ["a"]`, `"attempts": true`, `"force": "no"`. Each verb reads
its arguments through these, so a value of the wrong kind or out of bounds is
refused in one line (`Refused`) before any verb runs or anything is stored,
and a boolean never passes for a number nor a string for a boolean.
"""

from __future__ import annotations

from typing import Any

from owl.rules import bounds
from owl.errors import Refused


def _checked(fn: Any, *a: Any) -> Any:
    try:
        return fn(*a)
    except bounds.OutOfBounds as e:
        raise Refused(str(e)) from None


def ident(args: dict[str, Any], key: str) -> int:
    """A Job's or a Run's id: required, a whole number from 1 to what SQLite can
    hold; a JSON number only (never "3", true, NaN or 3.0)."""
    if key not in args or args[key] is None:
        raise Refused(f"{key} is missing: give a whole number of 1 or more")
    return _checked(bounds.ident, args.get(key), key)


def position(args: dict[str, Any], key: str = "position") -> int:
    """A place in the queue: any whole number SQLite can hold (the verb says
    which places the queue has)."""
    return whole(args, key, -bounds.SQLITE_INT_MAX, bounds.SQLITE_INT_MAX)


def whole(args: dict[str, Any], key: str, lo: int, hi: int) -> int:
    return _checked(bounds.whole, args.get(key), key, lo, hi)


def optional_whole(args: dict[str, Any], key: str, lo: int, hi: int) -> int | None:
    return None if args.get(key) is None else whole(args, key, lo, hi)


def page(args: dict[str, Any], key: str = "limit") -> int | None:
    """How many Jobs a list may hold (None: all of them)."""
    return optional_whole(args, key, 1, bounds.MAX_PAGE)


def attempts(args: dict[str, Any], key: str = "attempts") -> int | None:
    v = args.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= bounds.MAX_ATTEMPTS:
        raise Refused(
            f"--{key} must be a whole number, 1 or more (at most "
            f"{bounds.MAX_ATTEMPTS}), not {bounds.shown(v)}"
        )
    return v


def flag(args: dict[str, Any], key: str) -> bool:
    return _checked(bounds.flag, args.get(key), key)


def text(args: dict[str, Any], key: str) -> str:
    v = args.get(key)
    if not isinstance(v, str):
        raise Refused(f"{key} must be a string")
    return v


def optional_text(args: dict[str, Any], key: str) -> str | None:
    v = args.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise Refused(f"{key} must be a non-empty string, not {type(v).__name__}")
    return v


def seconds(args: dict[str, Any], key: str, default: float, hi: float) -> float:
    v = args.get(key, default)
    return _checked(bounds.seconds, default if v is None else v, key, hi)
