"""A Run's end: its record (or a full disk's wait for room), what it changed outside its worktree.

Apart from the engine's loop because ending a Run is bookkeeping with rules of
its own: the checks' verdict, a worktree that lost its repository, a record
held back until the disk has room, and the comparison of the project's refs
and hooks with the Run's start (git, so on a thread of its own that comes back
as a call). Every function runs on the engine thread and takes the engine as `eng`.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.engine import Engine

from owl import carryon, diskroom, guards, lifecycle, outside, outsidekeep, workspace
from owl import checks as checksmod
from owl.runstart import Live

log = logging.getLogger("owl.engine")


def finish(eng: Engine, lv: Live, f: lifecycle.Finish) -> None:
    lv.sink.close()
    verdict = carryon.conclude(eng.store, eng.waits, run_id=lv.run_id,
                               agent=getattr(lv.driver, "name", ""), outcome=f.outcome.value,
                               ended_by=f.ended_by.value, reason=f.reason,
                               exit_code=f.exit_code, report=lv.report)
    f = lifecycle.Finish(f.run, lifecycle.Outcome(verdict.outcome), f.ended_by,
                         verdict.reason, f.exit_code)
    reason = f.reason
    failed = [r for r in lv.results if r.outcome == "failed"]
    if f.outcome is lifecycle.Outcome.FAILED and failed and reason:
        line = checksmod.last_line(failed[-1].output)
        if line and failed[-1].exit_code not in (None, 0) and failed[-1].exit_code > 0:
            reason = f"{reason}: {line}"      # e.g. the shell's "not found"
    # Out of attempts with failing checks, the agent's work exists but does
    # not pass: a person must look, so the Job is blocked, not exhausted.
    spent = ("blocked", f"its checks failed on every attempt: {reason}") if failed else None
    outcome = f.outcome.value
    broken = broken_workspace(eng, lv)
    if broken and outcome == "succeeded":
        outcome, reason = "failed", broken      # a Run that could not commit never succeeds
    # the time it ended, kept with the record should it be written later
    args = (lv.run_id, outcome, f.ended_by.value, reason, f.exit_code, time.time())
    try:
        new_state = diskroom.write(eng._reserve,
                                   lambda: eng.store.finish_run(*args, spent=spent))
        if broken and new_state in ("pending", "exhausted", "review"):
            eng.store.set_job(lv.job_id, state="blocked", reason=broken)
            new_state = "blocked"
    except sqlite3.OperationalError as e:
        # A full disk: the Run is over all the same. Keep its record and
        # write it when there is room (or the next start records it
        # interrupted, should the daemon stop first).
        log.error("run %s ended but could not be recorded yet: %s", lv.run_id, e)
        eng._unrecorded.append((args, spent, {"job_id": lv.job_id, "title": lv.title,
                                               "log": str(lv.log_path)}))
        new_state = "not yet recorded"
    if new_state == "review":
        passed = sum(1 for r in lv.results if r.passed)
        log.info("%s", checksmod.review_message(lv.job_id, passed))
    del eng.live[lv.run_id]
    outside_after(eng, lv)
    log.info("run %s %s (%s); job %s is %s", lv.run_id, f.outcome.value, f.ended_by.value,
             lv.job_id, new_state)


def broken_workspace(eng: Engine, lv: Live) -> str | None:
    """Why the Run's worktree can no longer reach its repository (files only), with
    what the person can do; None when it can."""
    if lv.worktree is None:
        return None
    problem = workspace.reach_problem(Path(lv.project), lv.worktree)
    if problem is None and not (lv.worktree / ".git").exists():
        problem = f"the worktree {lv.worktree} lost its .git during the Run"
    if problem is None:
        return None
    job = eng.store.job(lv.job_id) or {}
    return guards.broken_reason(lv.job_id, job.get("branch"), problem)


def outside_after(eng: Engine, lv: Live) -> None:
    """Compare the project's refs, config and hooks with the Run's start,
    on a thread of its own (it runs git), and record what changed."""
    before = lv.outside_before
    if before is None:
        return
    job = eng.store.job(lv.job_id) or {}
    known = outside.owned_ref(job.get("branch"), eng.store.branches(lv.project))
    making = eng.setups.branches_made      # asked when compared: a setup may begin meanwhile

    def ignore(name: str) -> bool:
        return known(name) or (name.startswith("refs/heads/")
                               and name[len("refs/heads/"):] in making())
    project, run_id, job_id = Path(lv.project), lv.run_id, lv.job_id
    # The person worked beside this Run (owl start, a Shift): what changed may be theirs.
    beside = lv.exempt or run_id in eng.shift_runs

    def compare() -> list[dict] | None:
        found = outside.changes(before, outside.take(project), ignore_ref=ignore)
        return outside.shared(found) if beside else found

    if eng._stopping:                 # no later pass of the loop would record it
        record_outside(eng, run_id, job_id, compare())
        return

    def work() -> None:
        found = compare()
        eng._q.put(("call", lambda: record_outside(eng, run_id, job_id, found),
                     concurrent.futures.Future()))
    threading.Thread(target=work, daemon=True, name=f"owl-outside-{run_id}").start()


def own_ref_moves(eng: Engine, project: Path,
                  moved: dict[str, tuple[str | None, str | None]]) -> None:
    """Owl itself moved refs in `project` (`moved`, from `outside.moves`: accept
    --merge): the live Runs there take those moves as their starting point, so
    no agent is said to have made them."""
    for lv in eng.live.values():
        if lv.project == str(project) and lv.outside_before is not None:
            lv.outside_before = outside.with_moves(lv.outside_before, moved)
            outsidekeep.keep(eng.paths.logs, lv.run_id, lv.project, lv.outside_before)


def record_outside(eng: Engine, run_id: int, job_id: int, found: list[dict] | None) -> None:
    """Write what the Run changed outside its branch, then drop the start's
    snapshot kept on disk (kept should the write fail: the next start compares it)."""
    if found is None:
        log.warning("job %s run %s: the project's refs, config and hooks could not be "
                    "read at its start, so nothing was compared", job_id, run_id)
        outsidekeep.forget(eng.paths.logs, run_id)
        return
    try:
        eng.store.set_run(run_id, outside=json.dumps(found))
    except sqlite3.OperationalError as e:
        log.warning("run %s: could not record what it changed outside its branch (%s); "
                    "the next start compares it again", run_id, e)
    else:
        outsidekeep.forget(eng.paths.logs, run_id)
    if found:
        log.warning("job %s run %s: %s", job_id, run_id, outside.summary(found))
    if eng.on_change is not None:
        eng.on_change()


def record_pending_finishes(eng: Engine) -> None:
    while eng._unrecorded:
        args, spent = eng._unrecorded[0][:2]
        try:
            diskroom.write(eng._reserve, lambda: eng.store.finish_run(*args, spent=spent))
        except sqlite3.OperationalError:
            return
        eng._unrecorded.pop(0)
        log.info("run %s recorded %s", args[0], args[1])
    eng._reserve.ensure()


def note_untouchable(eng: Engine, lv: Live) -> None:
    """Name, once, each process of the Run the system would not let us
    signal (it became root, say): it is left alone and everything else
    goes on, but the person must know it is still there."""
    known = {p["pid"] for p in lv.untouchable}
    new = [p for p in lv.tree.refused() if p["pid"] not in known]
    if not new:
        return
    lv.untouchable = lv.untouchable + new
    for p in new:
        log.warning("run %s: pid %s (%s) is left alone: %s", lv.run_id, p["pid"],
                    p["command"], p["why"])
    eng._note(lv.run_id, untouchable=lv.untouchable)
