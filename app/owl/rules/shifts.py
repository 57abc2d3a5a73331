"""Shifts: bounded periods in which Runs start, and are not frozen, although
the machine is in use (`owl shift start --for 1h`). Pure: no clock, no I/O.

A Shift is always time-bound. Starting one while one is on extends it to the
later end (or replaces it with `--replace`). It ends when its time is up, when
the queue is empty if it was started `--until-empty`, or on `owl shift stop`;
the Runs it had then fall under the machine's rule at once (frozen if the
person is there). It is stored as wall-clock times so that
it survives a restart, and one whose end passed while the daemon was down is
simply over.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from owl.rules.bounds import MAX_SHIFT_S


@dataclass(frozen=True)
class Shift:
    started_at: float  # wall clock (time.time())
    ends_at: float
    until_empty: bool = False
    require_power: bool = False

    def left(self, now: float) -> float:
        return max(0.0, self.ends_at - now)

    def over(self, now: float, queue_empty: bool) -> str | None:
        """Why the Shift is over at `now`, or None while it goes on."""
        if now >= self.ends_at:
            return "its time is up"
        if self.until_empty and queue_empty:
            return "the queue is empty"
        return None

    def plausible(self, now: float) -> bool:
        """Whether a stored Shift could have been started by this Owl: finite
        times, ending no later than a week from now. One that is not (written
        by an Owl without bounds) is dropped rather than shown."""
        return (
            math.isfinite(self.started_at)
            and math.isfinite(self.ends_at)
            and self.ends_at <= now + MAX_SHIFT_S + 60
            and self.started_at <= now + 60
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "Shift | None":
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                float(data["started_at"]),
                float(data["ends_at"]),
                bool(data.get("until_empty")),
                bool(data.get("require_power")),
            )
        except (KeyError, TypeError, ValueError):
            return None


def begin(
    current: Shift | None,
    now: float,
    length: float,
    *,
    until_empty: bool = False,
    require_power: bool = False,
    replace: bool = False,
) -> Shift:
    """The Shift after `owl shift start`: a new one, or the current one extended."""
    if length <= 0:
        raise ValueError("a Shift needs a length of more than zero (e.g. --for 1h)")
    if length > MAX_SHIFT_S:
        raise ValueError("a Shift lasts at most a week (--for 7d); start another when it ends")
    end = now + length
    if current is None or replace or current.over(now, False):
        return Shift(now, end, until_empty, require_power)
    return Shift(
        current.started_at,
        max(current.ends_at, end),
        until_empty or current.until_empty,
        require_power or current.require_power,
    )
