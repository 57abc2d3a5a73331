"""A Run's end: its record (or a full disk's wait for room), what it changed outside its worktree.

Apart from the engine's loop because ending a Run is bookkeeping with rules of
its own: the checks' verdict, a worktree that lost its repository, a record
held back until the disk has room, and the comparison of the project's refs
and hooks with the Run's start (git, so on a thread of its own that comes back
as a call). Every function runs on the engine thread and takes the engine as `eng`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from owl.engine.state import State

from owl.engine import budgeting, capwatch, carryon
from owl.store import diskroom
from owl.git import guards
from owl.git import jobstore, storing
from owl.rules import jobrules, lifecycle
from owl.git import outside, safegit
from owl.git import outsidekeep, outsidewords
from owl.git import workspace
from owl.engine import checks as checksmod
from owl.engine import runstart, telling
from owl.engine.live import Live, RunEnd
from owl.rules import jobtable

log = logging.getLogger("owl.engine")


UNREAD = "Owl could not read its end"  # a Run whose end the judging could not take


def finish_safely(eng: State, lv: Live, f: lifecycle.Finish) -> None:
    """`finish`, and should anything in it fail (a Run's output Owl has no rule
    for), the Run ends `failed` with the reason "Owl could not read its end:
    …" and the engine goes on: nothing a Run left can stop the supervisor."""
    try:
        finish(eng, lv, f)
    except Exception as e:
        log.exception("run %s: its end could not be read", lv.run_id)
        eng.live.pop(lv.run_id, None)
        reason = f"{UNREAD}: {_why(e)}"
        try:
            if (eng.store.run(lv.run_id) or {}).get("state") == "ended":
                return  # recorded before what failed
            eng.store.finish_run(lv.run_id, "failed", f.ended_by.value, reason, f.exit_code)
            _block_if_twice(eng, lv.job_id, reason)
        except Exception:
            log.exception("run %s: could not be recorded; the next start records it", lv.run_id)


def _why(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 300 else text[:297] + "..."


def _block_if_twice(eng: State, job_id: int, reason: str) -> str | None:
    """Block the Job once the judging of its Runs' ends failed twice: never a
    loop of Runs whose ends cannot be read. Its new state, or None if left as is."""
    runs = eng.store.runs(job_id)
    if sum(1 for r in runs if (r.get("reason") or "").startswith(UNREAD)) < 2:
        return None
    job = eng.store.job(job_id) or {}
    if job.get("state") not in ("pending", "exhausted", "review"):
        return None
    return eng.store.apply(
        job_id,
        jobtable.Event.BROKEN,
        reason=f"Owl could not read the end of two of its Runs ({reason}); "
        f"look at them (owl logs {job_id}) before owl jobs extend "
        f"{job_id}",
    )


def _judge(
    eng: State, lv: Live, f: lifecycle.Finish
) -> tuple[lifecycle.Finish, bool, jobrules.Wait | None, bool]:
    """The Run's end as `jobrules` judges it from the agent's report, the
    wait it puts its agent in, and whether it blocks the Job (a setup problem);
    a judging that fails ends it failed, saying so (and True). A start that
    failed at the sandbox's own set-up is Owl's failure, not the agent's."""
    if lv.setup_failed is not None:
        verdict = jobrules.sandbox_failed(lv.setup_failed, _last_reason(eng, lv))
        end = lifecycle.Finish(
            f.run, lifecycle.Outcome(verdict.outcome), f.ended_by, verdict.reason, f.exit_code
        )
        return end, False, None, verdict.block
    try:
        verdict = carryon.conclude(
            eng.store,
            eng.waits,
            run_id=lv.run_id,
            agent=getattr(lv.driver, "name", ""),
            outcome=f.outcome.value,
            ended_by=f.ended_by.value,
            reason=f.reason,
            exit_code=f.exit_code,
            report=lv.report,
            max_wait=eng.cfg.max_wait,
            freeze=lv.freeze,
        )
        verdict = budgeting.run_ended(eng, lv, verdict)
    except Exception as e:
        log.exception("run %s: the end of its agent could not be judged", lv.run_id)
        return (
            lifecycle.Finish(
                f.run, lifecycle.Outcome.FAILED, f.ended_by, f"{UNREAD}: {_why(e)}", f.exit_code
            ),
            True,
            None,
            False,
        )
    return (
        lifecycle.Finish(
            f.run, lifecycle.Outcome(verdict.outcome), f.ended_by, verdict.reason, f.exit_code
        ),
        False,
        verdict.wait,
        verdict.block,
    )


def _last_reason(eng: State, lv: Live) -> str | None:
    """The reason the Job's Run before this one ended with, if any."""
    earlier = [r for r in eng.store.runs(lv.job_id) if r["id"] != lv.run_id]
    return earlier[-1]["reason"] if earlier else None


def term_level(eng: State, run_id: int) -> int:
    """How loud "asked to stop" is: after the agent's own exit the Term only ends
    what it left (every normal finish), which the log need not say."""
    ended_by = getattr(eng.core.runs.get(run_id), "ended_by", None)
    return logging.DEBUG if ended_by is lifecycle.EndedBy.EXIT else logging.INFO


def finish(eng: State, lv: Live, f: lifecycle.Finish) -> None:
    lv.sink.close()
    runstart.note_network(eng, lv)  # a Run too short for the watch to have read it
    f, unread, wait, block = _judge(eng, lv, f)
    outcome, reason = capwatch.judged(lv, f.outcome.value, f.reason)
    f = lifecycle.Finish(f.run, lifecycle.Outcome(outcome), f.ended_by, reason, f.exit_code)
    capped = capwatch.block_reason(eng, lv, outcome, reason)  # stopped twice in a row
    failed = [r for r in lv.results if r.outcome == "failed"]
    if f.outcome is lifecycle.Outcome.FAILED and failed and reason:
        line = checksmod.last_line(failed[-1].output)
        if line and failed[-1].exit_code not in (None, 0) and failed[-1].exit_code > 0:
            reason = f"{reason}: {line}"  # e.g. the shell's "not found"
    # Out of attempts with failing checks, the agent's work exists but does
    # not pass: a person must look, so the Job is blocked, not exhausted.
    spent = ("blocked", f"its checks failed on every attempt: {reason}") if failed else None
    outcome = f.outcome.value
    broken = broken_workspace(eng, lv)
    if broken and outcome == "succeeded":
        outcome, reason = "failed", broken  # a Run that could not commit never succeeds
    # the time it ended, kept with the record should it be written later
    args: RunEnd = (lv.run_id, outcome, f.ended_by.value, reason, f.exit_code, time.time())
    record_pending_notes(eng, lv.run_id)  # what a full disk held back of it, first
    try:
        new_state = diskroom.write(eng.reserve, lambda: eng.store.finish_run(*args, spent=spent))
        if (
            broken
            and new_state != jobtable.State.BLOCKED
            and jobtable.allows(jobtable.Event.BROKEN, new_state)
        ):
            new_state = eng.store.apply(lv.job_id, jobtable.Event.BROKEN, reason=broken)
        if unread:
            new_state = _block_if_twice(eng, lv.job_id, reason or UNREAD) or new_state
        if block and jobtable.allows(jobtable.Event.BROKEN, new_state):
            # the agent could not start for its setup: once, with what fixes it
            new_state = eng.store.apply(lv.job_id, jobtable.Event.BROKEN, reason=reason)
        if capped and jobtable.allows(jobtable.Event.BROKEN, new_state):
            new_state = eng.store.apply(lv.job_id, jobtable.Event.BROKEN, reason=capped)
    except sqlite3.OperationalError as e:
        # A full disk: the Run is over all the same. Keep its record and
        # write it when there is room (or the next start records it
        # interrupted, should the daemon stop first).
        log.error("run %s ended but could not be recorded yet: %s", lv.run_id, e)
        eng.unrecorded.append(
            (args, spent, {"job_id": lv.job_id, "title": lv.title, "log": str(lv.log_path)})
        )
        new_state = "not yet recorded"
        telling.disk_full(eng, str(eng.paths.db), str(e))
    if new_state == "review":
        passed = sum(1 for r in lv.results if r.passed)
        log.info("%s", checksmod.review_message(lv.job_id, passed))
    del eng.live[lv.run_id]
    # Told once the Run's branch is in the project and its git files checked
    # (a few git calls, off this thread): "ready for review" then names what
    # the review shows, and a Job blocked for its git files is told as blocked.
    outside_after(
        eng, lv, lambda blocked: telling.run_ended(eng, lv, blocked or new_state, wait, args[5])
    )
    log.info(
        "run %s %s (%s); job %s is %s",
        lv.run_id,
        f.outcome.value,
        f.ended_by.value,
        lv.job_id,
        new_state,
    )


def broken_workspace(eng: State, lv: Live) -> str | None:
    """Why the Run's worktree can no longer reach its repository (files only), with
    what the person can do; None when it can."""
    if lv.worktree is None:
        return None
    if lv.places is not None and lv.places.store is not None:
        # What the worktree's git files say is the agent's to write: they are
        # compared with what Owl made after the Run (`outside_after`), never
        # followed here. Only what Owl's records name must still be there.
        problem = workspace.project_problem(Path(lv.project))
        if problem is None and not Path(lv.places.store, "HEAD").is_file():
            problem = f"the Job's git store {lv.places.store} is gone"
    else:
        problem = workspace.reach_problem(Path(lv.project), lv.worktree)
    if problem is None and not (lv.worktree / ".git").exists():
        problem = f"the worktree {lv.worktree} lost its .git during the Run"
    if problem is None:
        return None
    job = eng.store.job(lv.job_id) or {}
    return guards.broken_reason(lv.job_id, job.get("branch"), problem)


def outside_after(
    eng: State, lv: Live, told: Callable[[str | None], None] = lambda state: None
) -> None:
    """On a thread of its own (it runs git): check the worktree's git files
    against what Owl made (put back, and the Job blocked, when they differ),
    bring the Job's branch from its store into the project, and compare the
    project's refs, config and hooks (and the store's refs) with the Run's
    start; record what changed. `told(state)` follows, on the engine thread
    (`state`: "blocked" when this blocked the Job, else None)."""
    before, places = lv.outside_before, lv.places
    if before is None and places is None:
        told(None)
        return
    job = eng.store.job(lv.job_id) or {}
    branch = job.get("branch")
    known = outside.owned_ref(branch, eng.store.branches(lv.project))
    making = eng.setups.branches_made  # asked when compared: a setup may begin meanwhile

    def ignore(name: str) -> bool:
        return known(name) or (
            name.startswith("refs/heads/") and name[len("refs/heads/") :] in making()
        )

    project, run_id, job_id = Path(lv.project), lv.run_id, lv.job_id
    # The person worked beside this Run (owl start, a Shift): what changed may be theirs.
    beside = lv.exempt or run_id in eng.shift_runs

    def compare() -> tuple[list[dict[str, Any]] | None, str | None]:
        files, problem = _git_files(job_id, places)
        problem = _land(project, places, branch) or problem
        found = None
        if before is not None:
            after = outside.take(project, places.store if places else None)
            found = outside.changes(before, after, ignore_ref=ignore)
            found = outside.shared(found) if beside else found
        if files:
            found = [*(found or []), *files]
        return found, problem

    if eng.stopping:  # no later pass of the loop would record it, nor freeze anything
        with safegit.allowed_here():
            found, problem = compare()
        told(record_outside(eng, run_id, job_id, found, problem))
        return

    def work() -> None:
        try:
            found, problem = compare()
        except Exception as e:  # a bug or git failing: still an answer
            log.exception("run %s: its end's git could not be done", run_id)
            found, problem = [outside.unknown(f"{project}: {e}")], f"Owl could not end it: {e}"

        def back() -> None:
            state = None
            try:
                state = record_outside(eng, run_id, job_id, found, problem)
            finally:
                told(state)

        eng.post(back)

    threading.Thread(target=work, daemon=True, name=f"owl-outside-{run_id}").start()


def _git_files(
    job_id: int, places: jobstore.Places | None
) -> tuple[list[dict[str, Any]], str | None]:
    """The worktree's git files a Run changed (put back), and the Job's reason."""
    if places is None:
        return [], None
    files: list[dict[str, Any]] = list(jobstore.verify(places))
    if not files:
        return [], None
    failed = jobstore.restore(places, files)
    return files, jobstore.tampered_reason(job_id, files, failed)


def _land(project: Path, places: jobstore.Places | None, branch: str | None) -> str | None:
    """Bring the Job's branch into the project; why it could not be, or None."""
    if places is None or not branch or workspace.project_problem(project):
        return None  # a project gone is the Job's reason already; its next setup lands it
    try:
        said = storing.land(project, places, branch)
    except jobstore.StoreError as e:
        return f"{e} (the commits are safe in the Job's store {places.store})"
    if said:
        log.info("%s: %s", branch, said)
    return None


def own_ref_moves(
    eng: State, project: Path, moved: dict[str, tuple[str | None, str | None]]
) -> None:
    """Owl itself moved refs in `project` (`moved`, from `outside.moves`: accept
    --merge): the live Runs there take those moves as their starting point, so
    no agent is said to have made them."""
    for lv in eng.live.values():
        if lv.project == str(project) and lv.outside_before is not None:
            lv.outside_before = outside.with_moves(lv.outside_before, moved)
            outsidekeep.keep(eng.paths.logs, lv.run_id, lv.project, lv.outside_before)


def record_outside(
    eng: State,
    run_id: int,
    job_id: int,
    found: list[dict[str, Any]] | None,
    problem: str | None = None,
) -> str | None:
    """Write what the Run changed outside its branch, then drop the start's
    snapshot kept on disk (kept should the write fail: the next start compares it).
    `problem`: why the Job cannot go on (its git files were changed, its
    branch could not be brought in): it is blocked with it. Returns the Job's
    new state when this changed it."""
    state = None
    if problem is not None:
        job = eng.store.job(job_id)
        if job is not None and jobtable.allows(jobtable.Event.BROKEN, job["state"]):
            state = eng.store.apply(job_id, jobtable.Event.BROKEN, reason=problem)
        log.warning("job %s blocked: %s", job_id, problem)
    if found is None:
        log.warning(
            "job %s run %s: the project's refs, config and hooks could not be "
            "read at its start, so nothing was compared",
            job_id,
            run_id,
        )
        outsidekeep.forget(eng.paths.logs, run_id)
        return state
    try:
        eng.store.set_run(run_id, outside=json.dumps(found))
    except sqlite3.OperationalError as e:
        log.warning(
            "run %s: could not record what it changed outside its branch (%s); "
            "the next start compares it again",
            run_id,
            e,
        )
    else:
        outsidekeep.forget(eng.paths.logs, run_id)
    if found:
        log.warning("job %s run %s: %s", job_id, run_id, outsidewords.summary(found))
    if eng.on_change is not None:
        eng.on_change()
    return state


def record_pending_notes(eng: State, run_id: int | None = None) -> None:
    """Write the live Runs' fields a full disk held back (`State.note`): all
    of them, or one Run's (before its end is written over them)."""
    for rid in [run_id] if run_id is not None else list(eng.unnoted):
        fields = eng.unnoted.pop(rid, None)
        if fields:
            eng.note(rid, **fields)


def record_pending_finishes(eng: State) -> None:
    record_pending_notes(eng)
    while eng.unrecorded:
        args, spent = eng.unrecorded[0][:2]
        try:
            diskroom.write(eng.reserve, lambda: eng.store.finish_run(*args, spent=spent))
        except sqlite3.OperationalError:
            return
        eng.unrecorded.pop(0)
        log.info("run %s recorded %s", args[0], args[1])
    eng.reserve.ensure()


def note_not_stopped(eng: State, lv: Live) -> None:
    """After a freeze: name the processes of the Run it left running (a stop
    that could not be sent, or not yet acted on). That is a failed freeze,
    never silent: logged, shown in place of "frozen" by the views, told
    once per process; the watch freezes again until none is left."""
    now = lv.tree.not_stopped()
    known = {p["pid"] for p in lv.not_stopped}
    lv.not_stopped = now
    if not now:
        if known:
            log.info("run %s: every process is stopped now", lv.run_id)
        return
    new = [p for p in now if p["pid"] not in known]
    if not new:
        return
    log.warning(
        "run %s: %d process%s still running after the freeze (Owl keeps trying): %s",
        lv.run_id,
        len(now),
        "" if len(now) == 1 else "es",
        "; ".join(f"pid {p['pid']} ({p['command']}): {p['why']}" for p in new[:5]),
    )
    telling.untouchable(eng, lv, new[:5])


def note_untouchable(eng: State, lv: Live) -> None:
    """Name, once, each process of the Run the system would not let us
    signal (it became root, say): it is left alone and everything else
    goes on, but the person must know it is still there."""
    known = {p["pid"] for p in lv.untouchable}
    new = [p for p in lv.tree.refused() if p["pid"] not in known]
    if not new:
        return
    lv.untouchable = lv.untouchable + new
    for p in new:
        log.warning(
            "run %s: pid %s (%s) is left alone: %s", lv.run_id, p["pid"], p["command"], p["why"]
        )
    eng.note(lv.run_id, untouchable=lv.untouchable)
    telling.untouchable(eng, lv, new)
