"""The Run's cgroup v2 around the sweep: freeze and kill all at once, where
the Run has one.

Apart from the sweep because it is a second path with reasons of its own,
and an optional one: the sweep works alone (macOS, no delegated cgroup,
``OWL_CGROUP=off``), and reads the same with or without these. Where the Run
has a cgroup (``cgroup.RunGroup``):

- its list of processes joins what the sweep walks: the kernel keeps every
  process of the Run in it, whatever it does to its parent, session or
  environment;
- the freeze is bracketed by a cgroup freeze, so nothing of the Run runs or
  forks while the SIGSTOPs go round;
- the kill begins with ``cgroup.kill``, every process at once, and the
  sweep's own kills then make sure.

Every function takes ``None`` (no cgroup) and then does nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cgroup import RunGroup


def listed(group: RunGroup | None, rows: dict[int, Any], me: int) -> list[tuple[int, Any]]:
    """(pid, start) of every process in the Run's cgroup that the table
    ``rows`` has, this process left out."""
    if group is None:
        return []
    # The kernel's own list: nothing leaves it, whatever it does.
    out = []
    for pid in group.pids():
        row = rows.get(pid)
        if row is not None and pid != me:
            out.append((pid, row.start))
    return out


@contextmanager
def frozen(group: RunGroup | None) -> Iterator[None]:
    """The cgroup frozen while the body sends its SIGSTOPs, thawed after."""
    if group is None:
        yield
        return
    # Not waiting for the kernel to say "frozen": the freeze is in force for
    # each process from this write (none runs its own code again, and a child
    # forked now is born frozen), and each one reports frozen only once it is
    # next scheduled. Waiting would make every process wait for its turn on a
    # busy core twice over, once to freeze and again, after the thaw below,
    # to act on its SIGSTOP: under load that wait is the freeze's whole tail.
    group.freeze(True, wait=0)  # nothing runs or forks while the stops go round
    try:
        yield
    finally:
        group.freeze(False)  # each wakes only to act on its SIGSTOP


def kill(group: RunGroup | None) -> None:
    """SIGKILL the whole cgroup at once; the sweep after it makes sure."""
    if group is not None:
        group.kill()


def remove(group: RunGroup | None) -> None:
    """Remove the Run's cgroup if it is empty (a busy one stays)."""
    if group is not None:
        group.remove()
