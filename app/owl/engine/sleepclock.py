"""How long the machine slept: the gap between a clock that stops while the
machine is suspended and one that does not.

`time.monotonic` (the engine's clock: runs.timeout and runs.stall count
working time) stands still while the machine sleeps, on Linux and macOS.
The grace window is a promise about the person's time, so sleep must count
for it: CLOCK_BOOTTIME (Linux) and CLOCK_MONOTONIC (macOS, where Python's
`time.monotonic` is the uptime clock) go on through a suspend. Each time the
gap between the two grows, the machine slept that long. Elsewhere no clock
is known to count sleep and nothing is ever reported.

Both clocks are injectable, so the rule is tested with fake ones.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

# A gap that grew by less than this is clock noise or a scheduling hiccup.
THRESHOLD = 1.0


def _through_sleep() -> Callable[[], float] | None:
    """The clock that keeps counting through a suspend, or None."""
    if sys.platform.startswith("linux") and hasattr(time, "CLOCK_BOOTTIME"):
        return lambda: time.clock_gettime(time.CLOCK_BOOTTIME)
    if sys.platform == "darwin" and hasattr(time, "CLOCK_MONOTONIC"):
        return lambda: time.clock_gettime(time.CLOCK_MONOTONIC)
    return None


class SleepWatch:
    """``slept()`` says how long the machine slept since it last said so."""

    def __init__(
        self, awake: Callable[[], float] = time.monotonic, total: Callable[[], float] | None = None
    ) -> None:
        self._awake = awake
        self._total = total if total is not None else _through_sleep()
        self._gap = self._read()

    def _read(self) -> float:
        return 0.0 if self._total is None else self._total() - self._awake()

    def slept(self) -> float:
        """Seconds asleep since the last report (0.0 if under THRESHOLD: small
        gaps add up until they count)."""
        gap = self._read()
        grown = gap - self._gap
        if grown < THRESHOLD:
            return 0.0
        self._gap = gap
        return grown
