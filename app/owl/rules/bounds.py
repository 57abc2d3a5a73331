"""The limits of every number a person or a script can give Owl.

A value out of these bounds is refused where it enters (the config file, the
`owl` command, the control socket) before anything is stored: a number SQLite
cannot hold, a Shift that would end in the year 30000, a grace window of a
century or a million Runs at once would each be stored first and break every
later read. Booleans are not numbers here, though Python counts them as ints.

Pure: constants and checks, no I/O (the CPU count is read once, when asked).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from owl.rules import timefmt

SQLITE_INT_MAX = (1 << 63) - 1  # the largest id or position SQLite stores
DAY = 86400.0
WEEK = 7 * DAY

MAX_SHIFT_S = WEEK  # `owl shift start --for`
MAX_GRACE_S = DAY  # interruption.grace_window
MAX_IDLE_AFTER_S = DAY  # idle.after
MAX_RUN_TIMEOUT_S = WEEK  # runs.timeout
MAX_STALL_S = DAY  # runs.stall
MAX_CHECK_TIMEOUT_S = DAY  # a check's timeout in .owl.toml
MAX_ATTEMPTS = 1000  # jobs.attempts, --attempts, extend
MAX_PAGE = 1_000_000  # `owl jobs --limit`: Jobs on one page
MAX_LIMIT_WAIT_S = 31 * DAY  # limits.max_wait: the longest an agent's limit may hold it


class OutOfBounds(ValueError):
    """A value outside its limits; str() is one line that gives them."""


def max_parallel() -> int:
    """How many Runs may run at once: four for every CPU, which is already far
    more than a laptop serves well."""
    return (os.cpu_count() or 1) * 4


def whole(value: Any, name: str, lo: int, hi: int) -> int:
    """`value` as a whole number within [lo, hi], or OutOfBounds; never a bool."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise OutOfBounds(f"{name} must be a whole number, not {shown(value)}")
    if not lo <= value <= hi:
        raise OutOfBounds(f"{name} must be between {lo} and {hi}, not {shown(value)}")
    return value


def ident(value: Any, name: str = "id") -> int:
    """An id of a Job or a Run (or a place in the queue): a whole number from 1
    to what SQLite can hold."""
    return whole(value, name, 1, SQLITE_INT_MAX)


_DIGITS = frozenset("0123456789")


def digits(text: str) -> int | None:
    """The number `text` writes with the ASCII digits 0-9 and nothing else (no
    sign, space, underscore, or another script's digits such as "３" or "٣"),
    or None. At most 40 digits are read: no id is longer."""
    if not isinstance(text, str) or not 0 < len(text) <= 40 or not set(text) <= _DIGITS:
        return None
    return int(text)


def seconds(value: Any, name: str, hi: float, lo: float = 0.0) -> float:
    """A length of time in seconds, more than `lo` and at most `hi`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OutOfBounds(f"{name} must be a number of seconds, not {shown(value)}")
    v = float(value) if abs(value) < 1e300 else math.inf
    if not math.isfinite(v) or not lo < v <= hi:
        raise OutOfBounds(
            f"{name} must be more than {timefmt.spell(lo)} and at most "
            f"{timefmt.spell(hi)}, not {shown(value)}"
        )
    return v


def flag(value: Any, name: str) -> bool:
    """A yes/no: true or false only (absent is false), never 0, 1 or "no"."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise OutOfBounds(f"{name} must be true or false, not {shown(value)}")
    return value


def shown(value: Any) -> str:
    """A wrong value as a message quotes it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def duration_check(hi: float) -> Callable[[float], str | None]:
    """A config-schema check: more than zero and at most `hi` seconds."""

    def check(v: float) -> str | None:
        if v <= 0:
            return "must be more than zero"
        if v > hi:
            return f"must be at most {timefmt.spell(hi)}"
        return None

    return check
