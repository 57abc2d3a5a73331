"""`owl jobs accept [--merge]` as the daemon carries it out.

A merge (a fast-forward of a checkout, a merge commit) can take a while in a
large project, and the supervisor must never wait on slow work. So the engine
says whether the Job may be accepted, git merges on the caller's thread (a
socket worker, or the tray's), and the engine then records the Job done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def accept(engine: Any, job_id: int, merge: bool, delete_branch: bool) -> dict:
    """Accept Job `job_id` through `engine`, merging first when asked."""
    e = engine
    if not merge:
        return e.call(lambda: e.verbs.accept(job_id, False, delete_branch))
    job = e.call(lambda: e.verbs.accept_ready(job_id))
    merged = None
    if job is not None:
        from owl import outside
        from owl.review import merge as mergemod

        project = Path(job["project"])
        before = outside.take(project)
        try:
            merged = mergemod.merge(project, job)[1]
        finally:        # live Runs there must not be said to have moved what Owl moved
            e.call(lambda: e._own_ref_moves(project, before))
    return e.call(lambda: e.verbs.accept(job_id, True, delete_branch, merged=merged))
