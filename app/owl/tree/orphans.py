"""Which orphans belong to a Run: re-parented processes, known by tag or session.

Apart from the sweep because an orphan cannot be found by walking parent
links: its parent died, and the kernel gave it to this daemon (a child
subreaper, Linux) or to init (launchd on macOS), where the machine's other
programs sit too. So among our own direct children, and init's where we do
not adopt, a process is the Run's if its environment carries the Run's tag,
or, on a backend without a subreaper, if it sits in a session or process
group the Run has had (``posix.Kin``: macOS hides the environment of its
own binaries).

Reading an environment costs a file read (or a system call) per candidate
on every sweep, and init has many children: so a miss is remembered by
identity (pid and start), and a candidate that started before the Run's
first leader is never the Run's.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from . import _platform, escaped


class Orphans:
    """The orphans of one Run tagged ``tag`` (name, value), sweep by sweep."""

    def __init__(self, tag: tuple[str, str], backend: ModuleType, kin: Any = None) -> None:
        self._tag = tag
        self._b = backend
        self._kin = kin  # a posix.Kin, or None
        self._me = os.getpid()
        self._not_ours: set[tuple[int, Any]] = set()
        self._epoch: Any = None  # earliest leader start
        # Children of launchd that may be the Run's work handed to it: (pid, start) ->
        # command, named and never claimed (see escaped.py).
        self.escaped: dict[tuple[int, Any], str] = {}

    def leader_started(self, start: Any) -> None:
        """A leader of the Run started at ``start``: nothing older is its."""
        if self._epoch is None or start < self._epoch:
            self._epoch = start

    def found(
        self, rows: dict[int, Any], children: dict[int, list[int]], members: dict[int, Any]
    ) -> list[tuple[int, Any]]:
        """(pid, start) of the Run's orphans in the table ``rows`` that are
        not among ``members`` yet. Each process's environment is read at
        most once: a miss is remembered by identity."""
        name, value = self._tag
        candidates = list(children.get(self._me, ()))
        from_init: set[int] = set()
        if not _platform.adopting and self._me != 1:
            from_init = set(children.get(1, ()))
            candidates += children.get(1, ())
        found = []
        for pid in candidates:
            row = rows[pid]
            key = (pid, row.start)
            m = members.get(pid)
            if m is not None and self._b.same_start(m.start, row.start):
                continue
            if row.state == self._b.DEAD or key in self._not_ours:
                continue
            if self._epoch is not None and row.start < self._epoch:
                self._not_ours.add(key)  # older than the Run itself
                continue
            env = self._b.environ(pid)
            if env is not None and env.get(name) == value:
                found.append(key)
            elif self._kin is not None and self._kin.claims(pid):
                found.append(key)  # untagged, in a session the Run had
            else:
                self._not_ours.add(key)
                if pid in from_init and self._kin is not None and self._epoch is not None:
                    command = escaped.looks_escaped(pid)
                    if command is not None:
                        self.escaped[key] = command
        if len(self._not_ours) > 4 * len(rows) + 256:
            self._not_ours = {
                k for k in self._not_ours if k[0] in rows and rows[k[0]].start == k[1]
            }
            self.escaped = {
                k: c for k, c in self.escaped.items() if k[0] in rows and rows[k[0]].start == k[1]
            }
        return found
