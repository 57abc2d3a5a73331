"""`owl jobs drop` on the engine thread: its two halves around git.

`drop_begin` checks the Job's state and holds it while `owl.verbs.caller_side`
looks for unkept work; `drop_commit` drops it and records the git still to
do. A Job with a Run going keeps its worktree and branch until every process
of the Run is gone: they are removed then, on a thread of their own.
"""

from __future__ import annotations

import logging
import threading

from owl.engine import telling
from owl.errors import Refused
from owl.git import guards
from owl.rules import jobtable
from owl.verbs import verifying
from owl.verbs.holding import Holding, daemons_git, job_row

log = logging.getLogger("owl.engine")


def _already_dropped(job_id: int) -> dict:
    return {
        "id": job_id,
        "state": "cancelled",
        "already": True,
        "message": f"job {job_id} was already dropped",
    }


class DropVerbs(Holding):
    """Drop, in halves: see the module docstring."""

    def drop_begin(self, job_id: int, force: bool) -> dict:
        """Whether Job `job_id` may be dropped as far as its state says: the Job
        (held) when git must still look for unkept work, else the answer."""
        job = self._drop_state(job_id, force)
        if job is None:
            return _already_dropped(job_id)
        self.hold(job_id, "being dropped")
        return {"job": job}

    def _drop_state(self, job_id: int, force: bool) -> dict | None:
        job = job_row(self.engine.store, job_id)
        self.refuse_while_busy(job_id)
        if job["state"] == "cancelled":
            return None
        if job["state"] == "done":
            raise Refused(f"job {job_id} is already done (accepted); its branch stays")
        if self.live_runs(job_id) and not force:
            raise Refused(f"job {job_id} has a Run going (use --force to end it and drop the job)")
        return job

    def drop_commit(self, job_id: int, force: bool) -> dict:
        """Drop the held Job (git found nothing unkept, or `force`)."""
        self.release(job_id)
        job = self._drop_state(job_id, force)
        if job is None:
            return _already_dropped(job_id)
        live = self.live_runs(job_id)
        store = self.engine.store
        with store.tx():  # dropped, and the git still to do, in one write
            store.apply(job_id, jobtable.Event.DROP)
            store.begin_verb(job_id, "drop", {"force": force})
        telling.job_gone(self.engine, job_id)
        if not live:
            return {
                "id": job_id,
                "state": "cancelled",
                "message": f"job {job_id} dropped",
                "workspace": job,
            }  # owl.verbs.caller_side removes it, off this thread

        # The agent may still be committing in its 5 s: the worktree and
        # branch go only once every process of the Run is gone.
        def remove() -> None:  # git: on a thread of its own, never this one
            threading.Thread(
                target=self._dropped_later, args=(job,), name=f"owl-drop-{job_id}", daemon=True
            ).start()

        for lv in live:
            self.engine.after_run[lv.run_id] = remove
            self.engine.do(
                self.engine.core.end(lv.run_id, self.engine.clock(), "the job was dropped")
            )
        return {
            "id": job_id,
            "state": "cancelled",
            "message": f"job {job_id} dropped; its worktree and branch go once its "
            f"Run has ended (owl jobs show {job_id} then says where the "
            "branch's commits are kept)",
        }

    def _dropped_later(self, job: dict) -> None:
        """A dropped Job's workspace, removed (on a thread of its own) once its Run
        ended; what became of the branch (the tip and how to bring it back) is kept
        as the Job's reason, written on the engine thread."""
        with daemons_git(self.engine):
            said = guards.drop_workspace(job)
        log.info("job %s dropped%s", job["id"], said)
        verifying.on_engine(
            self.engine,
            lambda: self.verb_done(job["id"], f"dropped{said}"),
            "a dropped Job's branch",
        )
