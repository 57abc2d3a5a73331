"""One process start seen in a Run's tree: its identity, the handle that
signals it, and the wait for members signalled to stop.

A member is only ever signalled through a handle checked against the start
time the sweep saw, and only ever given out as a psutil object checked the
same way, so a PID reused by someone else's process is never touched.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import psutil


class TreeMember:
    """One process start seen in the Run, and the open handle to signal it."""

    __slots__ = ("pid", "start", "handle", "proc", "refused")

    def __init__(self, pid: int, start: Any) -> None:
        self.pid = pid
        self.start = start
        self.handle: Any = None
        self.proc: psutil.Process | None = None
        # Why the kernel refused our last signal (EPERM), or None. Such a
        # process is left alone and not waited for; the rest goes on
        # (see untouchable.py).
        self.refused: str | None = None

    def process(self, b: ModuleType) -> psutil.Process | None:
        """This very process as psutil sees it (its start checked with the
        backend `b`), or None when it is gone or its PID is someone else's."""
        if self.proc is None:
            try:
                proc = psutil.Process(self.pid)
                if not b.matches(self.start, proc.create_time()):
                    return None
            except psutil.Error:
                return None
            self.proc = proc
        return self.proc


def wait_stopped(b: ModuleType, pending: Sequence[TreeMember], timeout: float) -> None:
    """Wait up to `timeout` s until none of `pending` (signalled SIGSTOP) is
    still running, as the backend `b` reads them; a process stops only when
    it is next scheduled, so right after the signal some still run."""
    deadline = time.monotonic() + timeout
    pause = 0.0001
    while pending and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, 0.005)
        still = []
        for m in pending:
            row = b.stat(m.pid)
            if row is not None and b.same_start(row.start, m.start) and row.state == b.RUNNING:
                still.append(m)
        pending = still
