"""`owl jobs verify`'s checks: run again on demand, off the engine thread.

A Job in review, blocked or exhausted can have its checks run again on its
branch, in its worktree (the verb's halves are `VerifyVerbs`, its git is in
`owl.verbs.caller_side`). The checks run on a thread of their own
(`checks.Verification`); each result, and the verdict, is written on the
engine thread, which alone writes the store. A Job whose checks all pass
goes to review. Started from the engine thread; takes the engine as `eng`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from owl.engine.loop import Engine

from owl.engine import carryon, containing, telling
from owl.engine import checks as checksmod
from owl.errors import Refused
from owl.rules import jobtable
from owl.verbs.holding import Holding, job_row

log = logging.getLogger("owl.engine")


def start(eng: Engine, job: dict, checks: tuple, source: str | None = None) -> None:
    """Start `checks` for `job` (its worktree exists; nothing else checks it);
    `source` is the commit whose .owl.toml declared them."""
    job_id = job["id"]
    env = dict(carryon.agent_env(os.environ), OWL_INSTANCE=eng.instance)  # as a Run's checks

    def record(result: checksmod.Result) -> None:
        on_engine(
            eng,
            lambda: eng.store.add_check(
                job_id=job_id, run_id=None, batch=v.batch, source=source, **result.row()
            ),
            "a verification's result",
        )

    def done(results: list[checksmod.Result]) -> None:
        on_engine(
            eng, lambda: verified(eng, job_id, len(checks), results), "a verification's verdict"
        )

    v = checksmod.Verification(
        job_id,
        checks,
        worktree=Path(job["worktree"]),
        logs=eng.paths.logs,
        env=env,
        nice=eng.cfg.nice,
        record=record,
        done=done,
        contain=containing.for_checks(
            eng.cfg, eng.paths, Path(job["worktree"]), Path(job["project"])
        ),
    )
    eng.verifications[job_id] = v
    v.start()


def verified(eng: Engine, job_id: int, declared: int, results: list[checksmod.Result]) -> None:
    """The verdict, on the engine thread: every declared check passed, or not."""
    eng.verifications.pop(job_id, None)
    ok = len(results) == declared and all(r.passed for r in results)
    job = eng.store.job(job_id)
    if ok and job is not None and jobtable.allows(jobtable.Event.VERIFIED, job["state"]):
        eng.store.apply(job_id, jobtable.Event.VERIFIED, reason=None)
        # back in review: told as a Run's end would be (away, batched)
        telling.verified(eng, job, [(r.name, r.passed) for r in results])
    log.info(
        "job %s verified on demand: %s", job_id, "all checks passed" if ok else "a check failed"
    )


def on_engine(eng: Engine, fn: Callable[[], Any], what: str) -> None:
    """Run `fn` on the engine thread from another; a stopping daemon loses it, said in the log."""
    try:
        eng.call(fn)
    except Exception as e:
        log.warning("could not record %s: %s", what, e)


class VerifyVerbs(Holding):
    """`owl jobs verify`, in halves around the read of the Job's checks."""

    def verify_begin(self, job_id: int) -> dict:
        """`owl jobs verify`, first half: the Job (held), when its checks may run
        again on its branch, in its worktree. owl.verbs.caller_side then reads the checks
        from the commit the Job started from (git), and `verify_commit` starts them."""
        job = self._verify_state(job_id)
        self.hold(job_id, "being checked")
        return job

    def _verify_state(self, job_id: int) -> dict:
        job = job_row(self.engine.store, job_id)
        self.refuse_while_busy(job_id)
        if self.live_runs(job_id):
            raise Refused(f"job {job_id} has a Run going; its checks run when its agent finishes")
        if job_id in self.engine.verifications:
            raise Refused(f"job {job_id}'s checks are already running")
        why = jobtable.refusal(jobtable.Event.VERIFY, job_id, job["state"])
        if why:
            raise Refused(why)
        worktree = Path(job["worktree"]) if job["worktree"] else None
        if worktree is None or not worktree.is_dir():
            raise Refused(f"job {job_id} has no worktree to check (it was accepted, or never ran)")
        return job

    def verify_commit(
        self, job_id: int, checks: tuple, source: str | None = None, where: str | None = None
    ) -> dict:
        """Start the held Job's `checks` (declared by the .owl.toml of commit
        `source`, said as `where`) on a thread of their own; the answer comes at
        once and `owl jobs show` gives the results. A Job whose checks all pass
        goes to review."""
        self.release(job_id)
        job = self._verify_state(job_id)
        self.engine.forget_settings(job["project"])
        start(self.engine, job, checks, source)
        n = len(checks)
        of = f", as the .owl.toml of {where} declares them" if where else ""
        return {
            "id": job_id,
            "state": job["state"],
            "verifying": True,
            "checks": n,
            "source": source,
            "message": f"job {job_id}: running {n} check{'s' if n != 1 else ''} on "
            f"{job['branch']}{of} (owl jobs show {job_id} gives the results)",
        }
