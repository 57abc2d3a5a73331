"""When what the daemon would show has changed: a counter views wait on.

A tray (in the daemon's process or joined over the socket) must follow the
daemon within a blink of a change — a Job added, a Run started, frozen or
ended — without reading the whole status every fraction of a second. The
engine notes, once per turn of its loop, a cheap fingerprint of what it
just did (`State.fingerprint`: rows the store changed, the core's actions,
the machine's reading, the live Runs); when it differs from the last, the counter goes up and every
waiter wakes. Reading the status changes nothing, so a view's own reads never
wake it.
"""

from __future__ import annotations

import threading
from typing import Hashable


class Changes:
    """A generation counter with a condition to wait on (any thread)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.generation = 0
        self._last: Hashable = None

    def note(self, fingerprint: Hashable) -> None:
        """The engine's fingerprint after a turn: a new one is a change."""
        if fingerprint != self._last:
            self._last = fingerprint
            self.bump()

    def bump(self) -> None:
        with self._cond:
            self.generation += 1
            self._cond.notify_all()

    def wait(self, since: int, timeout: float) -> int:
        """Block until the generation is past `since`, or `timeout` s pass; the generation."""
        with self._cond:
            self._cond.wait_for(lambda: self.generation != since, timeout)
            return self.generation
