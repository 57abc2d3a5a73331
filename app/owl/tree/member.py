"""One process start seen in a Run's tree: its identity, the handle that
signals it, and the wait for members signalled to stop.

A member is only ever signalled through a handle checked against the start
time the sweep saw, and only ever given out as a psutil object checked the
same way, so a PID reused by someone else's process is never touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import psutil


class TreeMember:
    """One process start seen in the Run, and the open handle to signal it."""

    __slots__ = ("pid", "start", "handle", "proc", "refused", "failed", "pgid", "sid")

    def __init__(self, pid: int, start: Any) -> None:
        self.pid = pid
        self.start = start
        self.handle: Any = None
        self.proc: psutil.Process | None = None
        # Why the kernel refused our last signal (EPERM), or None. Such a
        # process is left alone and not waited for; the rest goes on
        # (see untouchable.py).
        self.refused: str | None = None
        # Why our last signal could not even be sent (out of file
        # descriptors, say), or None: retried by the freeze and, while it
        # lasts, named as a process Owl could not stop.
        self.failed: str | None = None
        # Its process group and session as the last sweep that read it saw them.
        self.pgid = -1
        self.sid = -1

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


def wait_stopped(
    b: ModuleType,
    members: Sequence[TreeMember],
    rows: dict[int, Any],
    timeout: float,
    grouped: Mapping[TreeMember, int] | None = None,
    alone: Callable[[TreeMember], object] | None = None,
) -> tuple[dict[TreeMember, Any], list[TreeMember]]:
    """Wait up to `timeout` s until none of `members` (signalled SIGSTOP, in
    that order) is still running, as the backend `b` reads them. Returns the
    row last read for each member still there, and the members gone (exited,
    or their PID someone else's). `rows` holds rows read after the signals,
    taken as they are.

    A process stops only when it is next scheduled, so right after the
    signals some still run. The reads go from the last member signalled to
    the first, and one that finds its member running waits before it reads
    again: the last signalled is, as a rule, the last to stop, so while it
    runs the others need no read. Each member is then read about once,
    mostly after it stopped, not once per pause: a read (about 13 us)
    is the daemon's CPU, taken from the very processes that must run to
    stop. A member the kernel refused our signal (`refused`) is read, not
    waited for. A member stopped with its process group (``grouped``) that
    is read still running is given a signal of its own (``alone``), once: it
    may have left the group since the sweep, or be one the kernel would not
    let us signal (it became root), which the group's signal passes over
    without a word and only its own signal names (``refused``).
    """
    grouped = dict(grouped or {})
    seen: dict[TreeMember, Any] = {}
    gone: list[TreeMember] = []
    pending: list[TreeMember] = []
    for m in members:
        row = rows.get(m.pid)
        if row is not None and row.state != b.RUNNING:
            seen[m] = row
        else:
            pending.append(m)
    deadline = time.monotonic() + timeout
    pause = 0.0001
    while pending:
        m = pending[-1]
        row = b.stat(m.pid)
        if (
            row is None
            or not b.same_start(row.start, m.start)
            or (m.handle is not None and not m.handle.alive())
        ):
            gone.append(pending.pop())
        elif row.state != b.RUNNING or m.refused is not None or time.monotonic() >= deadline:
            seen[pending.pop()] = row
        elif alone is not None and grouped.pop(m, None) is not None:
            alone(m)
        else:
            time.sleep(pause)
            pause = min(pause * 2, 0.005)
    return seen, gone
