"""`owl jobs verify`'s checks: run again on demand, off the engine thread.

A Job in review, blocked or exhausted can have its checks run again on its
branch, in its worktree (the verb is in `owl.verbs`, its git in
`owl.verbwork`). The checks run on a thread of their own
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
    from owl.engine import Engine

from owl import carryon
from owl import checks as checksmod

log = logging.getLogger("owl.engine")


def start(eng: Engine, job: dict, checks: tuple) -> None:
    """Start `checks` for `job` (its worktree exists; nothing else checks it)."""
    job_id = job["id"]
    env = dict(carryon.agent_env(os.environ), OWL_INSTANCE=eng.instance)   # as a Run's checks

    def record(result: checksmod.Result) -> None:
        on_engine(eng, lambda: eng.store.add_check(
            job_id=job_id, run_id=None, position=result.position, name=result.name,
            command=result.command, outcome=result.outcome, exit_code=result.exit_code,
            duration_s=result.duration_s, output=result.output, log=result.log,
            batch=v.batch), "a verification's result")

    def done(results: list[checksmod.Result]) -> None:
        on_engine(eng, lambda: verified(eng, job_id, len(checks), results),
                  "a verification's verdict")

    v = checksmod.Verification(job_id, checks, worktree=Path(job["worktree"]),
                               logs=eng.paths.logs, env=env, nice=eng.cfg.nice,
                               record=record, done=done)
    eng.verifications[job_id] = v
    v.start()


def verified(eng: Engine, job_id: int, declared: int, results: list[checksmod.Result]) -> None:
    """The verdict, on the engine thread: every declared check passed, or not."""
    eng.verifications.pop(job_id, None)
    ok = len(results) == declared and all(r.passed for r in results)
    job = eng.store.job(job_id)
    if ok and job is not None and job["state"] in ("blocked", "exhausted"):
        eng.store.set_job(job_id, state="review", reason=None)
    log.info("job %s verified on demand: %s", job_id,
             "all checks passed" if ok else "a check failed")


def on_engine(eng: Engine, fn: Callable[[], Any], what: str) -> None:
    """Run `fn` on the engine thread from another; a stopping daemon loses it, said in the log."""
    try:
        eng.call(fn)
    except Exception as e:
        log.warning("could not record %s: %s", what, e)
