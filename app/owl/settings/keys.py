"""Every key of Owl's config file: its kind, its default and its check.

One table for the fixed sections, (section, key) -> `Key`, and one each for
the open-ended `[agents.NAME]` and `[projects."PATH"]` sections, so that
loading, checking, showing and writing back (`owl.settings.config`) all read
the same facts. A check returns a complaint in words, or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from owl.rules import bounds, lifecycle, runcaps
from owl.rules.timefmt import spell


@dataclass(frozen=True)
class Key:
    kind: str  # "duration", "bool", "int", "str", "argv", "amount" (runcaps.Amount)
    default: Any
    check: Callable[[Any], str | None] | None = None  # returns a complaint


def _attempts(v: int) -> str | None:
    if v < 1:
        return "must be 1 or more"
    return None if v <= bounds.MAX_ATTEMPTS else f"must be at most {bounds.MAX_ATTEMPTS}"


def _parallel(v: int) -> str | None:
    top = bounds.max_parallel()
    if v < 1:
        return "must be 1 or more"
    return None if v <= top else f"must be at most {top} (4 for each of this machine's CPUs)"


def _nice(v: int) -> str | None:
    return None if 0 <= v <= 19 else "must be between 0 and 19"


def _memory(v: runcaps.Amount) -> str | None:
    if v.size is not None and v.size < runcaps.MIN_MEMORY:
        return f"must be at least {runcaps.size_text(runcaps.MIN_MEMORY)} (or a share, or off)"
    return None


def _floor(v: runcaps.Amount) -> str | None:
    if v.share is not None and v.share > runcaps.MAX_FLOOR_SHARE:
        return f"must be at most {runcaps.MAX_FLOOR_SHARE:.0%} of the disk"
    return None


def _nonneg(v: int) -> str | None:
    return None if v >= 0 else "must be 0 or more"


SCHEMA: dict[str, dict[str, Key]] = {
    "idle": {
        "after": Key("duration", "10m", bounds.duration_check(bounds.MAX_IDLE_AFTER_S)),
        "require_ac_power": Key("bool", True),
    },
    "interruption": {
        "grace_window": Key(
            "duration", spell(lifecycle.GRACE_DEFAULT), bounds.duration_check(bounds.MAX_GRACE_S)
        ),
    },
    "runs": {
        "max_parallel": Key("int", 1, _parallel),
        "timeout": Key(
            "duration",
            spell(lifecycle.TIMEOUT_DEFAULT),
            bounds.duration_check(bounds.MAX_RUN_TIMEOUT_S),
        ),
        "stall": Key(
            "duration", spell(lifecycle.STALL_DEFAULT), bounds.duration_check(bounds.MAX_STALL_S)
        ),
        "nice": Key("int", 10, _nice),
        # what one Run may take of the machine (owl.rules.runcaps)
        "memory": Key("amount", runcaps.MEMORY_DEFAULT, _memory),
        "processes": Key("int", runcaps.PROCESSES_DEFAULT, runcaps.processes_check),
        "disk_floor": Key("amount", runcaps.DISK_FLOOR_DEFAULT, _floor),
    },
    "power": {
        "keep_awake": Key("bool", True),
        # hold the inhibitor on AC while Jobs wait, so the machine lives to be idle
        "hold_while_queued": Key("bool", False),
    },
    "jobs": {
        "attempts": Key("int", 3, _attempts),
        "branch_prefix": Key("str", "owl/"),
        # agents that carry a Job on while its own agent waits on a usage limit
        "fallback": Key("argv", None),
    },
    "agent": {
        "default": Key("str", "claude"),
    },
    "limits": {
        # the longest wait an agent's usage limit may set: a reset moment further
        # off is no reset moment (the backoff applies); no real limit is longer than a week
        "max_wait": Key("duration", "8d", bounds.duration_check(bounds.MAX_LIMIT_WAIT_S)),
    },
}


def _regex(v: str) -> str | None:
    try:
        re.compile(v)
    except re.error as e:
        return f"not a regular expression ({e})"
    return None


def _exit_code(v: int) -> str | None:
    return None if 1 <= v <= 255 else "must be an exit status from 1 to 255"


AGENT_KEYS: dict[str, Key] = {
    "command": Key("argv", None),
    "path": Key("str", None),
    "args": Key("argv", None),
    "allowed_tools": Key("argv", None),
    # claude: carry each Job's conversation on from Run to Run (--resume)
    "resume": Key("bool", None),
    # command agents: how their output says a usage limit was met (a wait, not a failure)
    "limit_pattern": Key("str", None, _regex),
    "limit_exit_code": Key("int", None, _exit_code),
}

PROJECT_KEYS: dict[str, Key] = {
    "max_parallel": Key("int", None, _parallel),
    "agent": Key("str", None),
}

BUILTIN_AGENTS = ("claude", "codex", "gemini", "opencode", "copilot", "pi", "aider")
