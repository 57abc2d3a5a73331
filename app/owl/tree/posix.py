"""The portable process-table backend, built on psutil alone.

This is the reference shape of a backend: every backend module (``linux``,
``macos``) offers the same names. It is what macOS uses for listing and
signalling (psutil has no Linux-style ``/proc`` fast path there), and the
Linux tests run it too so the portable path is exercised on every change.

A backend speaks in *start keys*: an opaque, exactly comparable value that
identifies one process together with its pid (here psutil's create time as a
float; on Linux the raw start time in clock ticks). ``create_time(start)``
turns a key into psutil's ``create_time()`` so identities can be stored and
compared by code that only knows psutil.
"""

from __future__ import annotations

import os
import shutil
from typing import NamedTuple

import psutil

NAME = "posix"

# Normalised states: a backend reports only these three letters.
RUNNING = "R"   # anything live and not stopped (running, sleeping, disk wait)
STOPPED = "T"   # stopped by a signal or a tracer
DEAD = "Z"      # zombie or dead: not a live process any more

# Two create times within this many seconds name the same process start.
# psutil derives create time from clock ticks (10 ms) plus the boot time;
# half a tick absorbs float noise without merging two different starts.
CREATE_TIME_TOLERANCE = 0.005


class Stat(NamedTuple):
    """One row of the process table, as much as a sweep needs."""

    ppid: int
    start: float
    state: str
    sid: int


_STATUS = {
    psutil.STATUS_ZOMBIE: DEAD,
    psutil.STATUS_DEAD: DEAD,
    psutil.STATUS_STOPPED: STOPPED,
    psutil.STATUS_TRACING_STOP: STOPPED,
}


def _state(status: str) -> str:
    return _STATUS.get(status, RUNNING)


def _sid(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def last_pid() -> int | None:
    """Unknown here (only Linux tells), so every sweep reads everything."""
    return None


def snapshot(since: int | None = None) -> dict[int, Stat]:
    """The whole process table: pid -> Stat, read in one pass. (``since``
    is for backends that have last_pid; here it is never given.)"""
    table: dict[int, Stat] = {}
    for proc in psutil.process_iter(["ppid", "create_time", "status"]):
        info = proc.info
        if info["ppid"] is None or info["create_time"] is None:
            continue
        table[proc.pid] = Stat(info["ppid"], info["create_time"],
                               _state(info["status"]), -1)
    return table


def stat(pid: int) -> Stat | None:
    """One process's row, or None if there is no such process."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return Stat(proc.ppid(), proc.create_time(),
                        _state(proc.status()), _sid(pid))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def zombie_children(pid: int) -> list[tuple[int, int]]:
    """(pid, session id) of every zombie child of ``pid``."""
    out = []
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return out
    for child in children:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.append((child.pid, _sid(child.pid)))
        except psutil.Error:
            continue
    return out


def create_time(start: float) -> float:
    """psutil's create_time() for a start key (here they are the same)."""
    return float(start)


def same_start(a: float, b: float) -> bool:
    return abs(a - b) <= CREATE_TIME_TOLERANCE


def matches(start: float, create_time_: float) -> bool:
    """Whether a start key names the process psutil dates ``create_time_``."""
    return same_start(start, create_time_)


class Handle:
    """A way to signal exactly one process start.

    psutil's ``send_signal`` re-checks the create time before signalling, so
    a reused PID is refused; the window between that check and ``kill()``
    is the best a platform without pidfds offers.
    """

    __slots__ = ("proc",)

    def __init__(self, proc: psutil.Process) -> None:
        self.proc = proc

    def send(self, sig: int) -> bool:
        """Signal the process; False if it is gone. PermissionError if the
        system will not let us (the tree decides what that means)."""
        try:
            self.proc.send_signal(sig)
            return True
        except (psutil.NoSuchProcess, ProcessLookupError):
            return False
        except psutil.AccessDenied as e:
            raise PermissionError(f"may not signal pid {self.proc.pid}") from e

    def alive(self) -> bool:
        """Whether the process still exists (psutil compares create times)."""
        return self.proc.is_running()

    def close(self) -> None:
        pass


def open_handle(pid: int, start: float) -> Handle | None:
    """A handle on the process ``pid`` that started at ``start``, or None
    if that process is gone (its PID free or reused)."""
    try:
        proc = psutil.Process(pid)
        if not same_start(proc.create_time(), start):
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return Handle(proc)


def environ(pid: int) -> dict[str, str] | None:
    """The environment a process started with; None if unreadable."""
    try:
        return psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return None


def become_subreaper() -> bool:
    """Only Linux can adopt orphaned descendants."""
    return False


def priority_prefix(nice: int) -> list[str]:
    """The argv prefix that starts a program at niceness ``nice``.

    ``nice(1)`` adds to the niceness of the thread that forks, so the
    increment is computed from ours; niceness is inherited across fork and
    exec, so everything the program starts keeps it.
    """
    return _nice_prefix(nice)


def _nice_prefix(nice: int) -> list[str]:
    increment = nice - os.getpriority(os.PRIO_PROCESS, 0)
    tool = shutil.which("nice")
    if tool is None or increment == 0:
        return []
    if increment < 0 and os.geteuid() != 0:
        # Only root may lower niceness; the children keep ours, which is
        # already lower priority than asked.
        return []
    return [tool, "-n", str(increment)]


__all__ = [
    "NAME", "RUNNING", "STOPPED", "DEAD", "Stat", "Handle", "snapshot", "stat",
    "last_pid",
    "zombie_children", "create_time", "same_start", "matches", "open_handle", "environ",
    "become_subreaper", "priority_prefix",
]
