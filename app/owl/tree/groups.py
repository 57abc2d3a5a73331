"""A freeze's SIGSTOPs sent a process group at a time, where that is safe.

Why: a Run of thousands of processes (a parallel build, a test farm) holds
them in a few process groups, and one signal per process costs the daemon a
call, and past its budget of kept pidfds (handles.py) an open, a check and a
close, for each: tens of milliseconds per thousand. Linux 6.9 signals a
whole group through the pidfd of its leader (``PIDFD_SIGNAL_PROCESS_GROUP``),
in one call.

Why it is safe, for a group chosen here:
- the pidfd names the leader's pid for good: a group whose leader is gone
  and whose id was handed to a stranger is a different pid to the kernel,
  and the signal reaches no one (the leader's handle must be one the tree
  keeps, opened and checked while the leader lived);
- every process of such a group is the Run's: a group lies within one
  session, a process enters a session only by being forked in it, and the
  group's session is not the daemon's (a group of the daemon's session is
  never signalled this way), so its every process descends from one of the
  Run's;
- what a group signal misses is caught after: a member still running when
  the freeze waits for its members to stop is signalled alone, once (it may
  have left the group since the last sweep read it, or be one the kernel
  will not let us signal, which the group's signal passes over in silence
  and only its own signal names); a new process is found by the freeze's
  sweeps, as ever.

Only the freeze sends this way; the thaw, the TERM and the kill go member by
member, where a missed one would be left stopped or running.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

# A group smaller than this is signalled member by member: as fast, and plainer.
SMALLEST = 3


class Member(Protocol):
    pid: int
    pgid: int  # as the last sweep that read it saw them
    sid: int
    handle: Any
    refused: str | None


M = TypeVar("M", bound=Member)


def stop(members: Iterable[M], own_sid: int, sig: int) -> dict[M, int]:
    """Send ``sig`` to each whole process group of ``members`` (as the sweeps
    last read them) that may take it at once; returns the members so
    covered, each with the group it was in."""
    by_group: dict[int, list[M]] = {}
    by_pid: dict[int, M] = {}
    for m in members:
        by_pid[m.pid] = m
        if m.pgid > 0 and m.sid != own_sid:
            by_group.setdefault(m.pgid, []).append(m)
    covered: dict[M, int] = {}
    for pgid, group in by_group.items():
        if len(group) < SMALLEST:
            continue
        leader = by_pid.get(pgid)
        handle = leader.handle if leader is not None else None
        if leader is None or leader.refused is not None or handle is None:
            continue
        if not getattr(handle, "holds_fd", False) or not handle.send_group(sig):
            continue
        for m in group:
            covered[m] = pgid
    return covered
