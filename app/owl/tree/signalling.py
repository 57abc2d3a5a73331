"""Signals to one member of a Run's tree, through a handle checked to be it.

Apart from the tree because it is a rule of its own about how a signal
reaches a process, not about which processes belong to the Run: a member's
handle is opened on the first signal (checked against the start time the
sweep saw, so a reused PID is never hit), kept while the daemon's budget of
handles allows (handles.py), and given back when the member leaves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import ModuleType

from . import handles, untouchable
from .member import TreeMember

# How often a freeze sends a stop again that could not be sent (1, 2, 4, 8 ms apart).
RETRIES = 4


def send(b: ModuleType, m: TreeMember, sig: int) -> bool:
    """Signal one member; False if it is gone or may not be signalled
    (EPERM marks it refused: see untouchable.send), or could not be
    (marked failed, with why). Its handle is opened on the first signal,
    checked against the start time the sweep saw (the backend's
    open_handle says how), and kept while handles.BUDGET allows; past
    it, it is opened, checked and closed for each signal."""
    handle = m.handle
    if handle is None:
        try:
            handle = b.open_handle(m.pid, m.start)
        except OSError as exc:
            untouchable.could_not(m, exc)
            return False
        if handle is None:
            return False
        if not getattr(handle, "holds_fd", False) or handles.take():
            m.handle = handle
    try:
        return untouchable.send(m, handle, sig)
    finally:
        if handle is not m.handle:
            handle.close()


def retry_failed(
    live: Iterable[TreeMember], again: Callable[[TreeMember], bool]
) -> set[TreeMember]:
    """Call ``again`` (a signal's send) once more for the members it could
    not reach (out of file descriptors, say), a few times with a short pause
    between: what a moment ago held the descriptors may have let them go.
    Returns the members it reached now."""
    live = list(live)
    reached: set[TreeMember] = set()
    pause = 0.001
    for _ in range(RETRIES):
        failed = [m for m in live if m.failed is not None]
        if not failed:
            break
        time.sleep(pause)
        pause *= 2
        reached.update(m for m in failed if again(m))
    return reached


def open_ahead(b: ModuleType, order: list[TreeMember], my_sid: int) -> None:
    """Open, within the budget (handles.py), the handles the next freeze
    will signal through, so that it opens none itself: each process
    group's leader first (one signal stops the group, see groups.py),
    then every other member of ``order``."""
    leaders = [m for m in order if m.pid == m.pgid and m.sid != my_sid]
    for m in [*leaders, *order]:
        if m.handle is not None or m.refused is not None:
            continue
        if handles.held() >= handles.BUDGET:
            return
        try:
            handle = b.open_handle(m.pid, m.start)
        except OSError:
            return  # out of descriptors: the freeze opens what it needs
        if handle is None:
            continue
        if getattr(handle, "holds_fd", False) and not handles.take():
            handle.close()
            return
        m.handle = handle


def drop_handle(m: TreeMember) -> None:
    """Close a member's kept handle and give its place in the budget back."""
    if m.handle is not None:
        if getattr(m.handle, "holds_fd", False):
            handles.give_back()
        m.handle.close()
        m.handle = None
