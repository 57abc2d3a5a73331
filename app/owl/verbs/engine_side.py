"""What people ask of the engine: the verbs behind `owl` and the tray menu.

`Verbs(engine)` holds the engine and nothing else, so whoever asks (the
daemon's dispatch, `owl.verbs.caller_side`) makes one where it asks; the
engine knows nothing of it. Every method runs on the engine thread (through
`Engine.call`), so it may read and change the engine's state,
and refuses with `Refused`, whose one line says why. The Run lifecycle's own
rules stay in `lifecycle.py`: a verb asks the core and carries out what it
says, like any other event.

No method here runs git. A verb that needs it (drop's check for unkept work,
accept's merge and worktree removal, verify's `.owl.toml`) comes in halves
that `owl.verbs.caller_side` strings together on the caller's thread: a `*_begin`
checks the Job's state and *holds* it (`owl.verbs.holding`), git runs there,
and a `*_commit` re-checks and changes the state. Those halves are in
`owl.verbs.dropping`, `owl.verbs.accepting` and `owl.verbs.verifying`; `Verbs`
is made of them. A held Job is neither started nor changed by another verb
meanwhile; that verb says so in words.
"""

from __future__ import annotations

import logging
import shlex
import sqlite3
import time
from typing import Any

from owl.engine import shiftwork
from owl.rules import jobrules
from owl.rules import lifecycle
from owl.rules import shifts
from owl.rules import timefmt
from owl.verbs import looking, views
from owl.verbs.accepting import AcceptVerbs
from owl.verbs.dropping import DropVerbs
from owl.verbs.holding import job_row
from owl.verbs.verifying import VerifyVerbs
from owl.errors import Refused
from owl.store import diskroom
from owl.rules import jobtable

log = logging.getLogger("owl.engine")

MAX_PROMPT = 100_000  # bytes; long context belongs in a file in the project


def check_prompt(
    prompt: Any, what: str = "prompt", empty: str = "say what the agent should do"
) -> None:
    """Refuse a prompt (or a reply) no agent could be given, in one line."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise Refused(f"the {what} is empty: {empty}")
    if "\x00" in prompt:
        # argv strings end at a NUL: the agent would get a cut prompt
        raise Refused(
            f"the {what} contains a NUL character, which no program's "
            "arguments can carry; remove it"
        )
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size > MAX_PROMPT:
        raise Refused(
            f"the {what} is {size:,} bytes; the limit is {MAX_PROMPT:,}"
            + (" (put long context in a file in the project)" if what == "prompt" else "")
        )


def wait_words(waits: dict[str, jobrules.Wait], agent: str | None, now: float) -> str | None:
    """Which wait holds `agent`'s Jobs, and the command that ends it:
    "claude waits until Dec 3 18:29 (Claude's weekly usage limit; ...); `owl
    agents wake claude` ends that wait". None when it is not waiting."""
    w = waits.get(agent) if agent else None
    if agent is None or w is None or not jobrules.waiting(w, now):
        return None
    return (
        f"{agent} waits until {timefmt.ahead(w.until, now)} ({w.reason}); "
        f"`owl agents wake {shlex.quote(agent)}` ends that wait"
    )


class Verbs(DropVerbs, AcceptVerbs, VerifyVerbs):
    """The person's requests; see the module docstring.

    Holds the engine rather than being part of it: every verb runs on the
    engine thread (through `Engine.call`) and changes the engine's state by
    its public fields and the few methods it names, so what a verb may touch
    is written down here (and in the modules of the verbs in halves)."""

    def add_prepared(self, prep: dict, attempts: int | None) -> dict:
        """Queue a Job whose project `verbwork.prepare_add` has already read."""
        check_prompt(prep["prompt"])
        if attempts is not None and (not isinstance(attempts, int) or attempts < 1):
            raise Refused("--attempts must be a whole number, 1 or more")
        self._refuse_if_full()
        self.engine.forget_settings(prep["root"])
        try:
            job_id = self.engine.store.add_job(
                prep["prompt"], prep["root"], prep["agent"], attempts or self.engine.cfg.attempts
            )
        except sqlite3.OperationalError as e:  # SQLITE_FULL, an I/O error
            raise Refused(f"cannot queue the job: {self.engine.paths.db}: {e}") from None
        self.engine.note_queued()
        return looking.job_view(self.engine, job_id)

    def _refuse_if_full(self) -> None:
        full = diskroom.disk_full(self.engine.paths.db.parent)
        if full:
            raise Refused(full)

    def start_now(self) -> dict:
        if self.engine.store.first_pending() is None:
            raise Refused("no Job is waiting to start")
        decision = self.engine.decide(asked=True)
        if decision.job is None:
            for job_id in self.engine.setups.jobs():
                # its Run starts when the setup is done, as `owl start` starts it
                self.engine.setups.asked.add(job_id)
                return {
                    "run_id": None,
                    "job_id": job_id,
                    "message": f"job {job_id} is being set up; its Run starts when it is "
                    "ready, and input will not freeze it",
                }
            head = self.engine.store.first_pending()
            if head is not None:
                agent = (self.engine.store.job(head[0]) or {}).get("agent")
                held = wait_words(self.engine.waits, agent, time.time())
                if held:
                    raise Refused(f"cannot start now: job {head[0]}'s agent {held}")
            raise Refused(f"cannot start now: {decision.waiting}")
        job_id = decision.job.id
        self.engine.start_job(job_id, exempt=True)

        def later(answer: dict) -> dict:
            """On the caller's thread: wait (a second at most) for the Run."""
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                run_id, job = self.engine.call(
                    lambda: (
                        next(
                            (lv.run_id for lv in self.engine.live.values() if lv.job_id == job_id),
                            None,
                        ),
                        self.engine.store.job(job_id),
                    )
                )
                if run_id is not None:
                    return {"run_id": run_id, "job_id": job_id}
                if job is not None and job["state"] == "blocked":
                    raise Refused(f"job {job_id} could not start: {job['reason']}")
                time.sleep(0.02)
            return {
                "run_id": None,
                "job_id": job_id,
                "message": f"job {job_id} is being set up; its Run starts in a moment, "
                "and input will not freeze it",
            }

        return {"job_id": job_id, views.LATER: later}

    def pause(self) -> dict:
        if self.engine.core.paused:  # the goal already holds: say so, and succeed
            return {
                "paused": True,
                "frozen": [],
                "already": True,
                "message": "already paused (owl resume lets work go on)",
            }
        try:
            self.engine.do(self.engine.core.pause(self.engine.clock()))
        except lifecycle.Refusal as e:
            raise Refused(str(e)) from None
        self.engine.store.set_setting("paused", True)
        frozen = [r.id for r in self.engine.core.runs.values() if r.frozen_by == lifecycle.USER]
        msg = (
            f"paused; {len(frozen)} Run{'s' if len(frozen) != 1 else ''} frozen"
            if frozen
            else "paused; nothing was running, and nothing will start until owl resume"
        )
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
            msg = (
                f"stopping {len(ids)} Run{'s' if len(ids) != 1 else ''} now "
                "(asked to end; killed 5 s later if still there)"
            )
        else:
            msg = (
                f"{len(ids)} Run{'s' if len(ids) != 1 else ''} frozen; ending in "
                f"{timefmt.duration(self.engine.cfg.grace_window)} unless resumed"
            )
        return {"runs": ids, "message": msg}

    # -------------------------------------------- verbs in halves (see owl.verbs.caller_side)

    def extend(self, job_id: int, attempts: int | None) -> dict:
        job = job_row(self.engine.store, job_id)
        self.refuse_while_busy(job_id)
        why = jobtable.refusal(jobtable.Event.EXTEND, job_id, job["state"])
        if why:
            raise Refused(why)
        more = 1 if attempts is None else attempts
        if not isinstance(more, int) or more < 1:
            raise Refused("--attempts must be a whole number, 1 or more")
        self.engine.store.apply(
            job_id, jobtable.Event.EXTEND, reason=None, attempts=job["attempts"] + more
        )
        self.engine.note_queued()
        return looking.job_view(self.engine, job_id)

    def reply(self, job_id: int, text: str, first: bool = False) -> dict:
        """`owl jobs reply`: the person's words send a Job back to the queue.

        Its next Run is given them (in the same conversation where the agent
        can resume it). The Job goes back to its old place, or to the head
        with `first`, with at least one attempt left."""
        job = job_row(self.engine.store, job_id)
        self.refuse_while_busy(job_id)
        why = jobtable.refusal(jobtable.Event.REPLY, job_id, job["state"])
        if why:
            raise Refused(why)
        check_prompt(text, "reply", "say what the agent should do next")
        self._refuse_if_full()
        with self.engine.store.tx():
            self.engine.store.add_reply(job_id, text)
            self.engine.store.apply(
                job_id,
                jobtable.Event.REPLY,
                reason=None,
                attempts=max(job["attempts"], job["failures"] + 1),
            )
        if first:
            self.engine.store.move(job_id, 1)
        self.engine.note_queued()
        view = looking.job_view(self.engine, job_id)
        view["message"] = (
            f"job {job_id} is queued again at position {view['position']}; "
            "its next Run is given your reply"
        )
        held = wait_words(self.engine.waits, job["agent"], time.time())
        if held:
            view["message"] += f"; it starts once that agent may run: {held}"
        return view

    def wake_agent(self, name: str) -> dict:
        """`owl agents wake NAME`: end the agent's usage-limit wait (or backoff)
        now; its Jobs may start at once, and its backoff starts over."""
        e = self.engine
        now = time.time()
        w = e.waits.get(name)
        if w is None or not jobrules.waiting(w, now):
            known = sorted({"claude", *e.cfg.agents, *e.waits})
            if name not in known:
                shown = repr(name) if len(name) <= 60 else repr(name[:57]) + "..."
                raise Refused(f"no agent {shown} (known: {', '.join(known)})")
            return {
                "agent": name,
                "waiting": False,
                "already": True,
                "message": f"{name} is not waiting: its Jobs start as the machine allows",
            }
        e.store.clear_limit(name)
        e.waits.pop(name, None)
        if w.kind.startswith("budget:"):  # the headroom: its next reading decides again
            from owl.engine import budgeting

            budgeting.forget(e, name)
        e.note_queued()
        log.info("%s's wait (%s) was ended by the person", name, w.reason)
        return {
            "agent": name,
            "waiting": False,
            "message": f"{name} no longer waits ({w.reason}); its Jobs may start now",
        }

    def move(self, job_id: int, position: int) -> dict:
        job = job_row(self.engine.store, job_id)
        self.refuse_while_busy(job_id)
        why = jobtable.refusal(jobtable.Event.MOVE, job_id, job["state"])
        if why:
            raise Refused(why)
        n = self.engine.store.queue_length()
        if not isinstance(position, int) or position < 1 or position > n:
            raise Refused(f"position {position} is outside the queue (1 to {n})")
        self.engine.store.move(job_id, position)
        return looking.job_view(self.engine, job_id)

    def shift_start(
        self,
        length: float,
        until_empty: bool,
        require_power: bool,
        replace: bool,
        spend: bool = False,
    ) -> dict:
        try:
            sh = shifts.begin(
                self.engine.shift,
                time.time(),
                length,
                until_empty=until_empty,
                require_power=require_power,
                replace=replace,
                spend=spend,
            )
        except ValueError as e:
            raise Refused(str(e)) from None
        extended = self.engine.shift is not None and not replace
        self.engine.store.set_setting("shift", sh.to_dict())
        self.engine.set_shift(sh)
        view = looking.shift_view(self.engine)
        assert view is not None  # a Shift is on: its view is always there
        left = timefmt.duration(sh.left(time.time()), coarse=True)
        view["message"] = (
            f"Shift {'extended' if extended else 'started'}: Runs start and "
            f"are not frozen for the next {left}"
            + (", or until the queue is empty" if sh.until_empty else "")
            + (", spending the agents' windows past the headroom kept" if sh.spend else "")
        )
        return view

    def shift_stop(self) -> dict:
        if self.engine.shift is None:
            return {"on": False, "already": True, "message": "no Shift is on"}
        self.engine.store.set_setting("shift", None)
        self.engine.set_shift(None)
        return shiftwork.ended(self.engine)
