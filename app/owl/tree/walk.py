"""The walk down parent links that finds a Run's processes in one process table.

Apart from the tree because it is the one step of a sweep that reads only
the table: no member, handle or signal. A Run is everything descended from
the processes it starts from (its leaders, its orphans, its cgroup's), so the
walk goes from each down the table's parent links, parents before children.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def children_of(rows: Mapping[int, Any]) -> dict[int, list[int]]:
    """Each pid's children in the table ``rows`` (pid -> a row with ``ppid``)."""
    children: dict[int, list[int]] = {}
    for pid, row in rows.items():
        children.setdefault(row.ppid, []).append(pid)
    return children


def descend(
    queue: list[tuple[int, Any]],
    rows: Mapping[int, Any],
    children: Mapping[int, list[int]],
    seen: set[int],
) -> Iterator[tuple[int, Any]]:
    """Each (pid, row) of the table reached from ``queue`` ((pid, start)
    pairs, the places the walk starts from), parents first, none twice;
    ``seen`` (the pids already taken) is added to as it goes. A pid that is
    not in the table is not yielded but its children still are: a process
    gone since the last sweep may have children listed under it in this
    table (read before they were re-parented)."""
    i = 0
    while i < len(queue):
        pid, start = queue[i]
        i += 1
        row = rows.get(pid)
        if row is not None:
            if pid in seen:
                continue
            seen.add(pid)
            yield pid, row
        for child in children.get(pid, ()):
            crow = rows[child]
            # A child cannot start before its parent: such an edge is a
            # stale read across a PID reuse.
            if child not in seen and crow.start >= start:
                queue.append((child, crow.start))
