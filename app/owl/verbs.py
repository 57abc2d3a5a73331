"""What people ask of the engine: the verbs behind `owl` and the tray menu.

`Verbs` holds the engine (`Engine.verbs`). Every method runs on the engine
thread (through `Engine.call`), so it may read and change the engine's state,
and refuses with `Refused`, whose one line says why. The Run lifecycle's own
rules stay in `lifecycle.py`: a verb asks the core and carries out what it
says, like any other event.

No method here runs git. A verb that needs it (drop's check for unkept work,
accept's merge and worktree removal, verify's `.owl.toml`) comes in halves
that `owl.verbwork` strings together on the caller's thread: a `*_begin`
here checks the Job's state and *holds* it (`hold`), git runs there, and a
`*_commit` here re-checks and changes the state. A held Job is neither
started nor changed by another verb meanwhile; that verb says so in words.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from owl import guards, lifecycle, shifts, timefmt
from owl import verbwork, verifying
from owl.errors import Refused

if TYPE_CHECKING:
    from owl.engine import Engine

log = logging.getLogger("owl.engine")

MAX_PROMPT = 100_000               # bytes; long context belongs in a file in the project
# A new Job is refused when the database's disk has less than this free: what
# is left is for the live Runs' records (and their logs), not for more work.
MIN_FREE = 1024 * 1024


def check_prompt(prompt: Any, what: str = "prompt",
                 empty: str = "say what the agent should do") -> None:
    """Refuse a prompt (or a reply) no agent could be given, in one line."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise Refused(f"the {what} is empty: {empty}")
    if "\x00" in prompt:
        # argv strings end at a NUL: the agent would get a cut prompt
        raise Refused(f"the {what} contains a NUL character, which no program's "
                      "arguments can carry; remove it")
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size > MAX_PROMPT:
        raise Refused(f"the {what} is {size:,} bytes; the limit is {MAX_PROMPT:,}"
                      + (" (put long context in a file in the project)" if what == "prompt"
                         else ""))


def job_row(store: Any, job_id: Any) -> dict:
    """The Job's row, or Refused saying there is no such Job."""
    job = store.job(job_id) if isinstance(job_id, int) else None
    if job is None:
        raise Refused(f"no job {job_id}")
    return job


def disk_full(folder: Path) -> str | None:
    """Why no new Job may be queued for want of disk room under `folder`, or None."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE:
        return (f"the disk holding {folder} is full ({free // 1024} KB free): no new Jobs "
                "until there is room; live Runs go on")
    return None


def _already_dropped(job_id: int) -> dict:
    return {"id": job_id, "state": "cancelled", "already": True,
            "message": f"job {job_id} was already dropped"}


class Verbs:
    """The person's requests; see the module docstring.

    Holds the engine rather than being part of it: every verb runs on the
    engine thread (through `Engine.call`) and changes the engine's state by
    its public fields and the few methods it names, so what a verb may touch
    is written down here."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add_prepared(self, prep: dict, attempts: int | None) -> dict:
        """Queue a Job whose project `verbwork.prepare_add` has already read."""
        check_prompt(prep["prompt"])
        if attempts is not None and (not isinstance(attempts, int) or attempts < 1):
            raise Refused("--attempts must be a whole number, 1 or more")
        self._refuse_if_full()
        self.engine.forget_settings(prep["root"])
        try:
            job_id = self.engine.store.add_job(prep["prompt"], prep["root"], prep["agent"],
                                        attempts or self.engine.cfg.attempts)
        except sqlite3.OperationalError as e:       # SQLITE_FULL, an I/O error
            raise Refused(f"cannot queue the job: {self.engine.paths.db}: {e}") from None
        self.engine.note_queued()
        return self.engine.job_view(job_id)

    def _refuse_if_full(self) -> None:
        full = disk_full(self.engine.paths.db.parent)
        if full:
            raise Refused(full)

    def start_now(self) -> dict:
        if self.engine.store.first_pending() is None:
            raise Refused("no Job is waiting to start")
        decision = self.engine.decide(asked=True)
        if decision.job is None:
            for job_id in self.engine.setups.jobs():
                raise Refused(f"job {job_id} is being set up; try again in a moment")
            raise Refused(f"cannot start now: {decision.waiting}")
        job_id = decision.job.id
        self.engine.start_job(job_id, exempt=True)

        def later(answer: dict) -> dict:
            """On the caller's thread: wait (a second at most) for the Run."""
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                run_id, job = self.engine.call(lambda: (next(
                    (lv.run_id for lv in self.engine.live.values() if lv.job_id == job_id), None),
                    self.engine.store.job(job_id)))
                if run_id is not None:
                    return {"run_id": run_id, "job_id": job_id}
                if job is not None and job["state"] == "blocked":
                    raise Refused(f"job {job_id} could not start: {job['reason']}")
                time.sleep(0.02)
            return {"run_id": None, "job_id": job_id,
                    "message": f"job {job_id} is being set up; its Run starts in a moment, "
                               "and input will not freeze it"}
        return {"job_id": job_id, verbwork.LATER: later}

    def pause(self) -> dict:
        if self.engine.core.paused:        # the goal already holds: say so, and succeed
            return {"paused": True, "frozen": [], "already": True,
                    "message": "already paused (owl resume lets work go on)"}
        try:
            self.engine.do(self.engine.core.pause(self.engine.clock()))
        except lifecycle.Refusal as e:
            raise Refused(str(e)) from None
        self.engine.store.set_setting("paused", True)
        frozen = [r.id for r in self.engine.core.runs.values() if r.frozen_by == lifecycle.USER]
        msg = (f"paused; {len(frozen)} Run{'s' if len(frozen) != 1 else ''} frozen"
               if frozen else "paused; nothing was running, and nothing will start until owl resume")
        return {"paused": True, "frozen": frozen, "message": msg}

    def resume(self) -> dict:
        try:
            self.engine.do(self.engine.core.resume(self.engine.clock()))
        except lifecycle.Refusal:
            return {"paused": False, "already": True, "message": "already running: not paused"}
        self.engine.store.set_setting("paused", False)
        return {"paused": False, "message": "resumed"}

    def stop_runs(self, force: bool) -> dict:
        stopped = {lv.job_id for lv in self.engine.live.values()}
        try:
            self.engine.do(self.engine.core.stop(self.engine.clock(), force=force))
            self.engine.set_aside |= stopped
        except lifecycle.Refusal:
            return {"runs": [], "already": True, "message": "nothing to stop: no Run is live"}
        ids = list(self.engine.core.runs)
        if force:
            msg = (f"stopping {len(ids)} Run{'s' if len(ids) != 1 else ''} now "
                   "(asked to end; killed 5 s later if still there)")
        else:
            msg = (f"{len(ids)} Run{'s' if len(ids) != 1 else ''} frozen; ending in "
                   f"{timefmt.duration(self.engine.cfg.grace_window)} unless resumed")
        return {"runs": ids, "message": msg}

    # -------------------------------------------- verbs in halves (see owl.verbwork)

    def hold(self, job_id: int, doing: str) -> None:
        """Keep Job `job_id` as it is while a verb's git runs off this thread;
        `doing` says what, for whoever asks meanwhile ("being dropped")."""
        self.engine.held[job_id] = doing

    def release(self, job_id: int) -> None:
        self.engine.held.pop(job_id, None)

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
        self._not_while_busy(job_id)
        if job["state"] == "cancelled":
            return None
        if job["state"] == "done":
            raise Refused(f"job {job_id} is already done (accepted); its branch stays")
        if self._live_runs(job_id) and not force:
            raise Refused(f"job {job_id} has a Run going (use --force to end it and drop the job)")
        return job

    def drop_commit(self, job_id: int, force: bool) -> dict:
        """Drop the held Job (git found nothing unkept, or `force`)."""
        self.release(job_id)
        job = self._drop_state(job_id, force)
        if job is None:
            return _already_dropped(job_id)
        live = self._live_runs(job_id)
        self.engine.store.set_job(job_id, state="cancelled")
        if not live:
            return {"id": job_id, "state": "cancelled", "message": f"job {job_id} dropped",
                    "workspace": job}       # owl.verbwork removes it, off this thread
        # The agent may still be committing in its 5 s: the worktree and
        # branch go only once every process of the Run is gone.
        def remove() -> None:       # git: on a thread of its own, never this one
            threading.Thread(target=self._dropped_later, args=(job,),
                             name=f"owl-drop-{job_id}", daemon=True).start()
        for lv in live:
            self.engine.after_run[lv.run_id] = remove
            self.engine.do(self.engine.core.end(lv.run_id, self.engine.clock(),
                                                "the job was dropped"))
        return {"id": job_id, "state": "cancelled",
                "message": f"job {job_id} dropped; its worktree and branch go once its "
                           f"Run has ended (owl jobs show {job_id} then says where the "
                           "branch's commits are kept)"}

    def _live_runs(self, job_id: int) -> list:
        return [lv for lv in self.engine.live.values() if lv.job_id == job_id]

    def _dropped_later(self, job: dict) -> None:
        """A dropped Job's workspace, removed (on a thread of its own) once its Run
        ended; what became of the branch (the tip and how to bring it back) is kept
        as the Job's reason, written on the engine thread."""
        said = guards.drop_workspace(job)
        log.info("job %s dropped%s", job["id"], said)
        verifying.on_engine(self.engine, lambda: self.engine.store.set_job(
            job["id"], reason=f"dropped{said}"), "a dropped Job's branch")

    def accept_begin(self, job_id: int) -> dict | None:
        """The Job (held), when it may be accepted as far as its state says;
        None when it already was; else Refused."""
        job = self._accept_state(job_id)
        if job is not None:
            self.hold(job_id, "being accepted")
        return job

    def _accept_state(self, job_id: int) -> dict | None:
        job = job_row(self.engine.store, job_id)
        self._not_while_busy(job_id)
        if job["state"] == "done":
            return None
        if job["state"] != "review":
            raise Refused(f"job {job_id} is {job['state']}, not in review")
        return job

    def accept_commit(self, job_id: int, merged: str | None, delete_branch: bool) -> dict:
        """Record the held Job done: its worktree is gone and, when asked, its
        branch merged (`merged` says how); owl.verbwork did the git."""
        self.release(job_id)
        job = job_row(self.engine.store, job_id)
        self.engine.store.set_job(job_id, state="done", worktree=None)
        said = f"; {merged}" if merged else ""
        return {"id": job_id, "state": "done", "branch": job["branch"], "merged": merged,
                "branch_deleted": delete_branch,
                "message": f"job {job_id} accepted{said}; branch {job['branch']} "
                           + ("deleted" if delete_branch else "kept")}

    def accepted_already(self, job_id: int) -> dict:
        job = job_row(self.engine.store, job_id)
        return {"id": job_id, "state": "done", "branch": job["branch"], "already": True,
                "message": f"job {job_id} was already accepted; branch {job['branch']} kept"}

    def extend(self, job_id: int, attempts: int | None) -> dict:
        job = job_row(self.engine.store, job_id)
        self._not_while_busy(job_id)
        if job["state"] not in ("exhausted", "blocked", "pending"):
            raise Refused(f"job {job_id} is {job['state']}; only an exhausted, blocked or "
                          "pending job takes more attempts")
        more = 1 if attempts is None else attempts
        if not isinstance(more, int) or more < 1:
            raise Refused("--attempts must be a whole number, 1 or more")
        self.engine.store.set_job(job_id, state="pending", reason=None,
                           attempts=job["attempts"] + more)
        self.engine.note_queued()
        return self.engine.job_view(job_id)

    def reply(self, job_id: int, text: str, first: bool = False) -> dict:
        """`owl jobs reply`: the person's words send a Job back to the queue.

        Its next Run is given them (in the same conversation where the agent
        can resume it). The Job goes back to its old place, or to the head
        with `first`, with at least one attempt left."""
        job = job_row(self.engine.store, job_id)
        self._not_while_busy(job_id)
        if job["state"] not in ("review", "blocked", "exhausted"):
            raise Refused(f"job {job_id} is {job['state']}; only a Job in review, blocked or "
                          "exhausted takes a reply")
        check_prompt(text, "reply", "say what the agent should do next")
        self._refuse_if_full()
        with self.engine.store.tx():
            self.engine.store.add_reply(job_id, text)
            self.engine.store.set_job(job_id, state="pending", reason=None,
                               attempts=max(job["attempts"], job["failures"] + 1))
        if first:
            self.engine.store.move(job_id, 1)
        self.engine.note_queued()
        view = self.engine.job_view(job_id)
        view["message"] = (f"job {job_id} is queued again at position {view['position']}; "
                           "its next Run is given your reply")
        return view

    def move(self, job_id: int, position: int) -> dict:
        job = job_row(self.engine.store, job_id)
        self._not_while_busy(job_id)
        if job["state"] != "pending":
            raise Refused(f"job {job_id} is {job['state']}; only pending jobs move")
        n = self.engine.store.queue_length()
        if not isinstance(position, int) or position < 1 or position > n:
            raise Refused(f"position {position} is outside the queue (1 to {n})")
        self.engine.store.move(job_id, position)
        return self.engine.job_view(job_id)

    def verify_begin(self, job_id: int) -> dict:
        """`owl jobs verify`, first half: the Job (held), when its checks may run
        again on its branch, in its worktree. owl.verbwork then reads the checks
        from the commit the Job started from (git), and `verify_commit` starts them."""
        job = self._verify_state(job_id)
        self.hold(job_id, "being checked")
        return job

    def _verify_state(self, job_id: int) -> dict:
        job = job_row(self.engine.store, job_id)
        self._not_while_busy(job_id)
        if self._live_runs(job_id):
            raise Refused(f"job {job_id} has a Run going; its checks run when its agent finishes")
        if job_id in self.engine.verifications:
            raise Refused(f"job {job_id}'s checks are already running")
        if job["state"] not in ("review", "blocked", "exhausted"):
            raise Refused(f"job {job_id} is {job['state']}; only a Job in review, blocked or "
                          "exhausted is verified on demand (a queued Job's checks run after its "
                          "next Run)")
        worktree = Path(job["worktree"]) if job["worktree"] else None
        if worktree is None or not worktree.is_dir():
            raise Refused(f"job {job_id} has no worktree to check (it was accepted, or never ran)")
        return job

    def verify_commit(self, job_id: int, checks: tuple) -> dict:
        """Start the held Job's `checks` on a thread of their own; the answer
        comes at once and `owl jobs show` gives the results. A Job whose
        checks all pass goes to review."""
        self.release(job_id)
        job = self._verify_state(job_id)
        self.engine.forget_settings(job["project"])
        verifying.start(self.engine, job, checks)
        n = len(checks)
        return {"id": job_id, "state": job["state"], "verifying": True, "checks": n,
                "message": f"job {job_id}: running {n} check{'s' if n != 1 else ''} on "
                           f"{job['branch']} (owl jobs show {job_id} gives the results)"}

    def _not_while_busy(self, job_id: int) -> None:
        """A Job whose worktree is being made, or that another verb holds while
        its git runs, cannot be changed under it: say so."""
        if self.engine.setups.busy(job_id):
            raise Refused(f"job {job_id} is being set up; try again in a moment")
        doing = self.engine.held.get(job_id)
        if doing:
            raise Refused(f"job {job_id} is {doing}; try again in a moment")

    def shift_start(self, length: float, until_empty: bool, require_power: bool,
                    replace: bool) -> dict:
        try:
            sh = shifts.begin(self.engine.shift, time.time(), length, until_empty=until_empty,
                              require_power=require_power, replace=replace)
        except ValueError as e:
            raise Refused(str(e)) from None
        extended = self.engine.shift is not None and not replace
        self.engine.store.set_setting("shift", sh.to_dict())
        self.engine.set_shift(sh)
        view = self.engine.shift_view()
        left = timefmt.duration(sh.left(time.time()), coarse=True)
        view["message"] = (f"Shift {'extended' if extended else 'started'}: Runs start and "
                           f"are not frozen for the next {left}"
                           + (", or until the queue is empty" if sh.until_empty else ""))
        return view

    def shift_stop(self) -> dict:
        if self.engine.shift is None:
            return {"on": False, "already": True, "message": "no Shift is on"}
        self.engine.store.set_setting("shift", None)
        self.engine.set_shift(None)
        # shift_view() is None once no Run of the Shift is left to finish
        view = self.engine.shift_view() or {"on": False, "ended": True, "finishing": 0}
        n = view.get("finishing", 0)
        view["message"] = ("Shift ended" + (f", {n} Run{'s' if n != 1 else ''} finishing"
                                             if n else ""))
        return view

