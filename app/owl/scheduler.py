"""Which Job runs next: the queue and the concurrency caps, with no I/O.

The queue is first in, first out by position. A Job that a cap holds back keeps
its place; the first runnable Job behind it starts instead. The smallest cap
that applies binds: the global `runs.max_parallel` and, per project, the
`max_parallel` from the config's project section or the project's `.owl.toml`.
When nothing can start, `pick` says why in words a person reads in
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
    waiting: str | None          # why the head of the queue is not starting


def _short(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home != "/" and path.startswith(home + os.sep) else path


def pick(pending: Sequence[QueuedJob], live_projects: Iterable[str], *,
         max_parallel: int, project_cap: Callable[[str], int | None]) -> Decision:
    """The first pending Job (in queue order) that no cap holds back.

    `pending` is in queue order; `live_projects` has one entry per live Run.
    """
    live = Counter(live_projects)
    total = sum(live.values())
    if not pending:
        return Decision(None, None)
    if total >= max_parallel:
        n = "Run" if max_parallel == 1 else "Runs"
        return Decision(None, f"at the cap of {max_parallel} running {n} (runs.max_parallel)")
    caps: dict[str, int | None] = {}
    head_reason: str | None = None
    for job in pending:
        if job.project not in caps:
            caps[job.project] = project_cap(job.project)
        cap = caps[job.project]
        if cap is not None and live[job.project] >= cap:
            if head_reason is None:
                head_reason = f"project {_short(job.project)} is at its cap of {cap}"
            continue
        return Decision(job, head_reason)
    return Decision(None, head_reason)
