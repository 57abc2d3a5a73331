"""What the verbs on the engine thread share: a Job's row, and a Job held.

Drop, accept and verify come in halves around git that runs on the caller's
thread (`owl.verbs.caller_side`): the first half *holds* the Job, so that it
is neither started nor changed by another verb meanwhile (that verb says so
in words), and a drop or accept records its intent before its git runs, so a
crash in the middle is finished or undone at the next start
(`owl.verbs.recovery`).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from owl.errors import Refused
from owl.git import safegit

if TYPE_CHECKING:
    from owl.engine.loop import Engine
    from owl.engine.live import Live


def job_row(store: Any, job_id: Any) -> dict:
    """The Job's row, or Refused saying there is no such Job."""
    job = store.job(job_id) if isinstance(job_id, int) else None
    if job is None:
        raise Refused(f"no job {job_id}")
    return job


def daemons_git(engine: Any) -> contextlib.AbstractContextManager[None]:
    """The git a verb runs carries the daemon's instance tag: should the daemon
    die, its watchdog and the next start end it with the Runs (and the sweeper
    each git runs under ends it at once; see owl.git.safegit)."""
    instance = getattr(engine, "instance", "")
    return safegit.tagged(OWL_INSTANCE=instance) if instance else contextlib.nullcontext()


class Holding:
    """The engine, and the Jobs its verbs hold; every verb class is made on it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def hold(self, job_id: int, doing: str) -> None:
        """Keep Job `job_id` as it is while a verb's git runs off this thread;
        `doing` says what, for whoever asks meanwhile ("being dropped")."""
        self.engine.held[job_id] = doing

    def release(self, job_id: int) -> None:
        self.engine.held.pop(job_id, None)

    def intend(self, job_id: int, verb: str, args: dict) -> None:
        """Record, before its git runs, what a verb is about to do to Job `job_id`'s
        git, so a crash in the middle is finished or undone at the next start
        (`owl.verbs.recovery`)."""
        self.engine.store.begin_verb(job_id, verb, args)

    def verb_step(self, job_id: int, step: str) -> None:
        self.engine.store.verb_step(job_id, step)

    def verb_done(self, job_id: int, reason: str | None = None) -> None:
        """The verb's git is all done (or came to nothing): forget the intent."""
        store = self.engine.store
        with store.tx():
            if reason is not None:
                store.set_job(job_id, reason=reason)
            store.end_verb(job_id)

    def refuse_while_busy(self, job_id: int) -> None:
        """A Job whose worktree is being made, or that another verb holds while
        its git runs, cannot be changed under it: say so."""
        if self.engine.setups.busy(job_id):
            raise Refused(f"job {job_id} is being set up; try again in a moment")
        doing = self.engine.held.get(job_id)
        if doing:
            raise Refused(f"job {job_id} is {doing}; try again in a moment")

    def live_runs(self, job_id: int) -> list[Live]:
        """The live Runs of Job `job_id` (a verb on it may have to end them)."""
        return [lv for lv in self.engine.live.values() if lv.job_id == job_id]
