"""Which Job runs next: the queue and the concurrency caps, with no I/O.

The queue is first in, first out by position. A Job that a cap holds back keeps
its place; the first runnable Job behind it starts instead. The smallest cap
that applies binds: the global `runs.max_parallel` and, per project, the
`max_parallel` from the config's project section or the project's `.owl.toml`.
When nothing can start, `decide` says why in words a person reads in
`owl status` ("project ~/code/api is at its cap of 1").
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence


@dataclass(frozen=True)
class QueuedJob:
    id: int
    project: str


@dataclass(frozen=True)
class Decision:
    job: QueuedJob | None
    waiting: str | None  # why the head of the queue is not starting


def _short(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "/" and path.startswith(home + os.sep) else path


def decide(
    head: QueuedJob | None,
    first_runnable: Callable[[set[str]], QueuedJob | None],
    live_projects: Iterable[str],
    *,
    max_parallel: int,
    project_cap: Callable[[str], int | None],
) -> Decision:
    """The Job to start next, or why none can.

    `head` is the first pending Job; `first_runnable(skip)` returns the first
    pending Job whose project is not in `skip`. Only a project with a live Run
    can be at its cap (caps are 1 or more; 0 stands for a project whose
    settings are not known yet, and is said so), so the projects to skip are found
    from the few live Runs, and the queue itself is never walked here: the
    store answers `first_runnable` with one indexed query, whatever its length.
    """
    if head is None:
        return Decision(None, None)
    live = Counter(live_projects)
    if sum(live.values()) >= max_parallel:
        n = "Run" if max_parallel == 1 else "Runs"
        return Decision(None, f"at the cap of {max_parallel} running {n} (runs.max_parallel)")
    capped: dict[str, int] = {}
    for project, count in live.items():
        cap = project_cap(project)
        if cap is not None and count >= cap:
            capped[project] = cap
    waiting = None
    if head.project in capped:
        cap = capped[head.project]
        waiting = (
            f"project {_short(head.project)} is at its cap of {cap}"
            if cap > 0
            else f"project {_short(head.project)}'s settings (.owl.toml) are being read"
        )
    return Decision(first_runnable(set(capped)), waiting)


def pick(
    pending: Sequence[QueuedJob],
    live_projects: Iterable[str],
    *,
    max_parallel: int,
    project_cap: Callable[[str], int | None],
) -> Decision:
    """`decide` over a queue held in memory (in queue order)."""

    def first_runnable(skip: set[str]) -> QueuedJob | None:
        return next((j for j in pending if j.project not in skip), None)

    return decide(
        pending[0] if pending else None,
        first_runnable,
        live_projects,
        max_parallel=max_parallel,
        project_cap=project_cap,
    )
