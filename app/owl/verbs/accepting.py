"""`owl jobs accept` on the engine thread: its two halves around git.

`accept_begin` checks the Job's state (asking `jobtable`) and holds it while
`owl.verbs.caller_side` merges and removes the worktree; `accept_commit`
records the Job done, with the branch's deletion still to come when asked.
"""

from __future__ import annotations

from owl.engine import telling
from owl.errors import Refused
from owl.rules import jobtable
from owl.verbs.holding import Holding, job_row


class AcceptVerbs(Holding):
    """Accept, in halves: see the module docstring."""

    def accept_begin(self, job_id: int, anyway: bool = False) -> dict | None:
        """The Job (held), when it may be accepted as far as its state says;
        None when it already was; else Refused. `anyway`: blocked or exhausted
        may be accepted too (past the checks that failed it)."""
        job = self._accept_state(job_id, anyway)
        if job is not None:
            self.hold(job_id, "being accepted")
        return job

    def _accept_state(self, job_id: int, anyway: bool = False) -> dict | None:
        job = job_row(self.engine.store, job_id)
        self.refuse_while_busy(job_id)
        if job["state"] == "done":
            return None
        event = jobtable.Event.ACCEPT_ANYWAY if anyway else jobtable.Event.ACCEPT
        if anyway and job["state"] in ("blocked", "exhausted"):
            if self.live_runs(job_id) or job_id in self.engine.verifications:
                raise Refused(f"job {job_id} has checks or a Run going; accept it once they end")
        why = jobtable.refusal(event, job_id, job["state"])
        if why:
            if not anyway and jobtable.allows(jobtable.Event.ACCEPT_ANYWAY, job["state"]):
                why += (
                    f" (owl jobs accept {job_id} --anyway keeps its work past its failing checks)"
                )
            raise Refused(why)
        return job

    def accept_commit(
        self,
        job_id: int,
        merged: str | None,
        delete_branch: bool,
        past: str | None = None,
        signed: str | None = None,
    ) -> dict:
        """Record the held Job done: its worktree is gone and, when asked, its
        branch merged (`merged` says how); owl.verbs.caller_side did the git.
        `past`: the state (blocked, exhausted) it was accepted from anyway, which
        its reason keeps, with why it was so. `signed`: what was said of signing
        its commits ("signed 3 commits with …", "kept unsigned …"), if anything."""
        self.release(job_id)
        job = job_row(self.engine.store, job_id)
        note = None
        if past is not None:
            note = f"accepted past failing checks (it was {past}"
            note += f": {job['reason']})" if job.get("reason") else ")"
        event = jobtable.Event.ACCEPT_ANYWAY if past is not None else jobtable.Event.ACCEPT
        store = self.engine.store
        with store.tx():
            store.apply(job_id, event, worktree=None, **({"reason": note} if note else {}))
            if delete_branch:
                store.verb_step(job_id, "done")  # the branch's deletion is still to come
            else:
                store.end_verb(job_id)
        telling.job_gone(self.engine, job_id)
        said = f"; {signed}" if signed else ""
        said += f"; {merged}" if merged else ""
        if note:
            said += "; accepted past failing checks"
        return {
            "id": job_id,
            "state": "done",
            "branch": job["branch"],
            "merged": merged,
            "signed": signed,
            "branch_deleted": delete_branch,
            "accepted_anyway": past is not None,
            "message": f"job {job_id} accepted{said}; branch {job['branch']} "
            + ("deleted" if delete_branch else "kept"),
        }

    def accepted_already(self, job_id: int) -> dict:
        job = job_row(self.engine.store, job_id)
        return {
            "id": job_id,
            "state": "done",
            "branch": job["branch"],
            "already": True,
            "message": f"job {job_id} was already accepted; branch {job['branch']} kept",
        }
