"""The process starts a Run's tree has met, by pid: taken in, checked again
at each sweep, and let go.

Apart from the tree because it is the one rule of identity the sweep keeps:
a member is a (pid, start) pair, and a pid whose start has changed, or whose
kept handle says its process is gone, is someone else's now. Letting one go
closes its handle (signalling.drop_handle), so none outlives its member.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from . import signalling
from .member import TreeMember


class Known(dict[int, TreeMember]):
    """The members met so far, by pid (``b`` the backend that compares starts)."""

    def __init__(self, b: ModuleType) -> None:
        super().__init__()
        self._b = b

    def remember(self, pid: int, start: Any) -> TreeMember:
        """The member for this process start, made if it is new; one that
        held the pid with another start is let go."""
        m = self.get(pid)
        if m is not None and self._b.same_start(m.start, start):
            return m
        if m is not None:
            self.forget(m)
        m = TreeMember(pid, start)
        self[pid] = m
        return m

    def forget(self, m: TreeMember) -> None:
        """Let ``m`` go, and its handle with it."""
        if self.get(m.pid) is m:
            del self[m.pid]
        signalling.drop_handle(m)

    def holds(self, m: TreeMember) -> bool:
        """Whether ``m`` is still the member for its pid."""
        return self.get(m.pid) is m

    def walk_from(self, rows: dict[int, Any], partial: bool) -> list[tuple[int, Any]]:
        """(pid, start) of the members a sweep of the table ``rows`` walks
        from, letting go of those whose pid is someone else's now. In a
        ``partial`` table (only the processes started since a mark), a member
        not read is taken on trust."""
        queue: list[tuple[int, Any]] = []
        for pid, m in list(self.items()):
            row = rows.get(pid)
            if row is None:
                if partial:
                    queue.append((pid, m.start))  # not read this time
                    continue
                # Gone since the last sweep. Its children may still be listed
                # under it in this table (read before they were re-parented),
                # so walk it once more, then let it go.
                self.forget(m)
                queue.append((pid, m.start))
            elif not self._b.same_start(row.start, m.start):
                self.forget(m)  # PID reused: not ours any more
            elif m.handle is not None and not m.handle.alive():
                # Same start tick, yet the process the handle holds is gone:
                # a PID reused within one clock tick (only a pidfd can tell).
                self.forget(m)
            else:
                queue.append((pid, m.start))
        return queue

    def close(self) -> None:
        """Let every member go (their processes are not touched)."""
        for m in list(self.values()):
            self.forget(m)
