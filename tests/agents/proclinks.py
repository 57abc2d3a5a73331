"""Who is under whom, read straight from /proc: the one reader the freeze's
probes and benches share.

Read apart from Owl's own process tree on purpose: what a freeze left
running is judged by a reader that shares nothing with the code under test.
A sibling of the agent scripts that use it (a script's own folder is first
on its import path, even under ``python -S`` and inside a Run's sandbox).
"""

from __future__ import annotations

import os

HOPS = 64  # deeper than any tree the tests and benches start


def table() -> dict[int, tuple[int, str]]:
    """Every process now: pid -> (parent pid, state letter), from /proc/PID/stat
    (a process gone while read is left out)."""
    rows: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            rest = data[data.rfind(b")") + 2 :].split()
            rows[int(name)] = (int(rest[1]), rest[0].decode())
    return rows


def under(top: int, rows: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """Every pid of ``rows`` (default: the table now) descended from ``top``,
    by the parent links."""
    rows = table() if rows is None else rows
    out = []
    for pid, (up, _) in rows.items():
        hops = 0
        while hops < HOPS:
            if up == top:
                out.append(pid)
                break
            row = rows.get(up)
            if row is None:
                break
            up, hops = row[0], hops + 1
    return out
