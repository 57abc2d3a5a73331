"""The `[budget]` section: what unattended work may spend (`owl.rules.budget`).

    [budget]
    keep_five_hour = "20%"   # of each agent's five-hour window, kept for you
    keep_seven_day = "30%"   # of its seven-day window
    finish_run = false       # true: a Run that reaches the line may finish
    daily_usd = 5.0          # all agents together, the dollars they report (on a
                             # subscription the API-equivalent, not a bill)
    run_usd = 2.0            # one Run, the same figure
    daily_tokens = 2000000   # where an agent reports only tokens (input + output)
    run_tokens = 500000

Apart from `config` so that the section's checks live in one place; errors
are ValueError with the whole one-line message (file, key, value).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from owl.rules.budget import KEEP_FIVE_HOUR, KEEP_SEVEN_DAY, Caps, percent

KEYS = (
    "keep_five_hour",
    "keep_seven_day",
    "finish_run",
    "daily_usd",
    "run_usd",
    "daily_tokens",
    "run_tokens",
)
MAX_USD = 1_000_000.0
MAX_TOKENS = 10**12
_PERCENT = re.compile(r"^\s*(\d{1,3}(\.\d{1,2})?)\s*%\s*\Z")


def load(body: Any, where: str) -> Caps:
    """The section checked, as Caps; ValueError naming the key and value."""
    if not isinstance(body, dict):
        raise ValueError(f"{where}: budget = {_show(body)}: must be a table [budget]")
    got: dict[str, Any] = {}
    for key, value in body.items():
        if key not in KEYS:
            raise ValueError(
                f"{where}: unknown key budget.{key} (known in [budget]: {', '.join(KEYS)})"
            )
        got[key] = _check(key, value, where)
    return Caps(**got)


def _check(key: str, value: Any, where: str) -> Any:
    def bad(why: str) -> ValueError:
        return ValueError(f"{where}: budget.{key} = {_show(value)}: {why}")

    if key.startswith("keep_"):
        m = _PERCENT.match(value) if isinstance(value, str) else None
        if m is None or float(m.group(1)) > 100:
            raise bad('must be a share from "0%" to "100%", e.g. "20%"')
        return float(m.group(1)) / 100
    if key == "finish_run":
        if not isinstance(value, bool):
            raise bad("must be true or false")
        return value
    if key.endswith("_usd"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("must be a number of dollars, e.g. 5.0")
        if not math.isfinite(value) or not 0 < value <= MAX_USD:
            raise bad(f"must be more than 0 and at most {MAX_USD:,.0f}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad("must be a whole number of tokens")
    if not 0 < value <= MAX_TOKENS:
        raise bad(f"must be more than 0 and at most {MAX_TOKENS:,}")
    return value


def document(caps: Caps) -> dict[str, Any]:
    """The section in force, for `owl config show` (a cap not set is left out)."""
    doc: dict[str, Any] = {
        "keep_five_hour": percent(caps.keep_five_hour),
        "keep_seven_day": percent(caps.keep_seven_day),
        "finish_run": caps.finish_run,
    }
    for key in ("daily_usd", "run_usd", "daily_tokens", "run_tokens"):
        value = getattr(caps, key)
        if value is not None:
            doc[key] = value
    return doc


def defaults() -> dict[str, Any]:
    return document(Caps(KEEP_FIVE_HOUR, KEEP_SEVEN_DAY))


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
