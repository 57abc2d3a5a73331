"""A Run's live meter: the usage windows its agent reports, read as its output comes.

The log pipe's reader thread shows each chunk of output here (`feed`); the
lines that say something of the windows (the driver's `windows_in`) leave
readings, which the engine takes on its own thread at each watch (`take`).
Lines are split here with a bounded carry: a line longer than MAX_LINE is
no report of a window (they are short), so it is skipped, not held.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from owl.rules.budget import Reading

MAX_LINE = 64 * 1024
KEEP = 64  # readings held between two takes, at most (the newest)


class Meter:
    def __init__(self, windows_in: Callable[[str, float], list[Reading]]) -> None:
        self._windows_in = windows_in
        self._carry = b""
        self._skipping = False  # inside a line past MAX_LINE
        self._lock = threading.Lock()
        self._new: list[Reading] = []

    def feed(self, chunk: bytes) -> None:
        """On the reader's thread: the agent's next output."""
        lines = chunk.split(b"\n")
        lines[0] = self._carry + lines[0]
        self._carry = lines.pop()
        found: list[Reading] = []
        for raw in lines:
            if self._skipping:
                self._skipping = False
                continue
            found += self._windows_in(raw.decode("utf-8", "replace"), time.time())
        if len(self._carry) > MAX_LINE:
            self._carry, self._skipping = b"", True
        if found:
            with self._lock:
                self._new = (self._new + found)[-KEEP:]

    def take(self) -> list[Reading]:
        """On the engine's thread: the readings since the last take."""
        with self._lock:
            out, self._new = self._new, []
        return out
