"""Which Jobs start now, and the setups that come back: the scheduler's answer, made real.

Apart from the engine's loop because choosing is its own subject: the
scheduler's decision with the Jobs the person stopped, the agents waiting out a
usage limit and the Jobs being set up; each project's `.owl.toml` (read with git,
so on a thread of its own, cached here); and what a setup's result means for its
Job. Runs on the engine thread; takes the engine as `eng`.
"""

from __future__ import annotations

import dataclasses

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from owl.engine.state import State

from owl.engine import budgeting, capwatch, carryon, containing, sandboxwait
from owl.rules import scheduler
from owl.engine import runend
from owl.engine import runstart
from owl.engine import telling
from owl.settings import project as projectmod
from owl.git import setup as setupmod
from owl.rules import jobtable

log = logging.getLogger("owl.engine")


def maybe_start(eng: State, now: float) -> None:
    runend.record_pending_finishes(eng)
    budgeting.settle_all(eng)  # a reset passed, or the config moved the lines
    head = eng.store.first_pending()
    eng.has_pending = head is not None
    if head is None:
        eng.waiting = None
        return
    # The floor first: a disk that is full is under it too, and its words
    # name the setting that holds the queue (runs.disk_floor).
    low = capwatch.start_gate(eng)
    if low is not None:
        was, eng.waiting = eng.waiting, low
        if was != low:
            log.warning("%s", low)
        return
    full = eng.disk_full_now()
    if full:
        was, eng.waiting = eng.waiting, full.split(": no new Jobs")[0]
        if was != eng.waiting:  # told once as it begins, not at every look
            telling.disk_full(eng, str(eng.paths.db.parent), full)
        return
    day = budgeting.day_hold(eng)
    if day is not None:
        eng.waiting = day.reason
        return
    ok, why = eng.core.may_start()
    if not ok:
        eng.containment.next_at = 0.0  # the next spell's first attempt asks the sandbox afresh
        eng.waiting = (
            why
            if why != "the machine is in use" or eng.reading.problem is None
            else f"the machine cannot be read: {eng.reading.problem}"
        )
        return
    while True:
        decision = decide(eng)
        was, eng.waiting = eng.waiting, decision.waiting
        if decision.job is None:
            problem = eng.containment.problem
            if problem and eng.waiting and eng.waiting != was and problem in eng.waiting:
                telling.uncontained(eng, problem)  # told as the wait begins, not at every look
            return
        start_job(eng, decision.job.id, exempt=False)


def decide(eng: State, asked: bool = False) -> scheduler.Decision:
    """What the scheduler says now. Jobs the person stopped sit out the rest
    of this spell (`owl stop` ends this work, not work), unless `asked`."""
    aside = frozenset() if asked else frozenset(eng.set_aside)
    pending = eng.store.pending_agents()
    # agents that must be contained wait, while no sandbox can be made, as
    # agents waiting out a limit do; so do Jobs whose project asks for one
    unsandboxed = sandboxwait.held_agents(eng, pending)
    sandboxless = frozenset(eng.containment.held) if eng.containment.problem else frozenset()
    limited = carryon.held_jobs_agents(
        pending,
        eng.cfg.fallback or [],
        carryon.blocked_agents(eng.waits, time.time()) | unsandboxed,
    )
    setting_up = eng.setups.jobs()  # they hold their places and slots
    # held: a verb's git
    passed = aside | frozenset(setting_up) | frozenset(eng.held) | sandboxless

    def first(skip: set[str] = set()) -> scheduler.QueuedJob | None:
        row = eng.store.first_pending(skip, passed, limited)
        return scheduler.QueuedJob(*row) if row else None

    head_row = eng.store.first_pending()
    eng.has_pending = head_row is not None
    head = first()
    decision = scheduler.decide(
        head,
        first,
        [lv.project for lv in eng.live.values()] + list(setting_up.values()),
        max_parallel=eng.cfg.max_parallel,
        project_cap=lambda project: project_cap(eng, project),
    )
    if head_row is not None and head_row[0] in setting_up and decision.job is None:
        decision = scheduler.Decision(None, f"job {head_row[0]} is being set up")
    if head_row is not None and head_row[0] in aside and decision.waiting is None:
        decision = scheduler.Decision(
            decision.job,
            f"job {head_row[0]} was stopped; it waits for the next idle spell (or owl start)",
        )
    if head_row is not None and limited and decision.waiting is None:
        agent = (eng.store.job(head_row[0]) or {}).get("agent")
        if agent in limited:
            lead = agent.split(",")[0]
            why = eng.waits[lead].reason if lead in eng.waits else "its agents' limits"
            if lead in unsandboxed and lead not in eng.waits:
                why = containing.waiting_words(eng.containment.problem or "")
                decision = scheduler.Decision(decision.job, f"job {head_row[0]} waits: {why}")
            else:
                decision = scheduler.Decision(decision.job, f"job {head_row[0]} waits for {why}")
    if head_row is not None and head_row[0] in sandboxless and decision.waiting is None:
        why = containing.waiting_words(eng.containment.problem or "")
        decision = scheduler.Decision(decision.job, f"job {head_row[0]} waits: {why}")
    return decision


def project_cap(eng: State, project: str) -> int | None:
    """The project's cap, from what is known now: its `.owl.toml` is read (git)
    on a thread of its own, and until it is first known no more of the
    project's Jobs start (0: not known yet, which the scheduler says so;
    `owl start` reads them first, on its caller's thread)."""
    caps = [eng.cfg.project_cap(project)]
    settings = settings_now(eng, project)
    if settings is None:
        return 0
    if not isinstance(settings, projectmod.ProjectError):  # reported when its Job starts
        caps.append(settings.max_parallel)
    known = [c for c in caps if c is not None]
    return min(known) if known else None


def settings_now(eng: State, project: str) -> Any:
    """The cached settings (or ProjectError) of a project, None if not yet known;
    a stale or missing entry is read again off this thread."""
    hit = eng.settings_cache.get(project)
    if (hit is None or eng.clock() - hit[0] > 10.0) and project not in eng.settings_reading:
        eng.settings_reading.add(project)

        def read() -> None:
            value = projectmod.read(Path(project))
            eng.post(lambda: learn_settings(eng, project, value))

        threading.Thread(target=read, name="owl-project", daemon=True).start()
    return None if hit is None else hit[1]


def learn_settings(eng: State, project: str, value: Any) -> None:
    """A project's settings (or its ProjectError), read off this thread, known now."""
    eng.settings_reading.discard(project)
    eng.settings_cache[project] = (eng.clock(), value)


def unknown_settings(eng: State) -> list[str]:
    """The projects with a live Run or a setup whose settings are not known now:
    the caps `decide` would have to take as 0. `owl start` reads them first."""
    busy = {lv.project for lv in eng.live.values()} | set(eng.setups.jobs().values())
    return sorted(
        p for p in busy if (hit := eng.settings_cache.get(p)) is None or eng.clock() - hit[0] > 10.0
    )


def start_job(eng: State, job_id: int, *, exempt: bool) -> None:
    """Begin setting up the Job's worktree, on a thread of its own (see owl.git.setup);
    the agent starts when it is ready (`_setup_done`), a failure blocks the Job."""
    job = eng.store.job(job_id)
    assert job is not None
    if job_id in eng.verifications:
        eng.verifications.pop(job_id).cancel(wait=0)  # the Run takes the worktree
    # Read afresh: the checks that gate this Run are those committed now.
    eng.settings_cache.pop(str(job["project"]), None)
    # A Job naming several agents (or a config fallback): the first that does
    # not wait does this Run.
    agent = carryon.next_agent(
        job["agent"],
        eng.cfg.fallback or [],
        carryon.blocked_agents(eng.waits, time.time())
        | sandboxwait.held_agents(eng, [job["agent"]]),
    )
    job = {**job, "agent": agent}
    eng.setups.begin(
        setupmod.Request(
            job=job,
            agent_config=eng.cfg.agent(agent),
            prefix=eng.cfg.branch_prefix,
            worktrees=eng.paths.worktrees,
            instance=eng.instance,
            exempt=exempt,
        )
    )
    log.info("job %s: setting up its worktree", job_id)


def record_setup(eng: State, job_id: int, fresh: dict[str, Any] | None) -> None:
    """From a setup's thread: write (or clear) the names of what it is about to
    make, on this thread, and return once they are written."""

    def write() -> None:
        pending = dict(eng.store.setting(setupmod.SETTING, {}) or {})
        if fresh is None:
            pending.pop(str(job_id), None)
        else:
            pending[str(job_id)] = fresh
        eng.store.set_setting(setupmod.SETTING, pending or None)

    eng.call(write, timeout=30)


def setup_done(eng: State, result: setupmod.Result) -> None:
    """A setup came back: start the agent, block the Job, or leave it waiting."""
    job_id = result.job_id
    eng.setups.done(job_id)
    if job_id in eng.setups.asked and isinstance(result, (setupmod.Ready, setupmod.Failed)):
        # `owl start` came while the machine's own start was setting it up
        result = dataclasses.replace(result, exempt=True)
    eng.setups.asked.discard(job_id)
    pending = dict(eng.store.setting(setupmod.SETTING, {}) or {})
    fresh = pending.pop(str(job_id), None)
    if isinstance(result, setupmod.Cancelled):
        eng.store.set_setting(setupmod.SETTING, pending or None)
        log.info("job %s: setup cancelled; nothing of it is left", job_id)
        return
    job = eng.store.job(job_id)
    if isinstance(result, setupmod.Failed):
        eng.store.set_setting(setupmod.SETTING, pending or None)
        if job is not None and jobtable.allows(jobtable.Event.SETUP_FAILED, job["state"]):
            eng.store.apply(job_id, jobtable.Event.SETUP_FAILED, reason=result.reason)
        log.warning("job %s blocked: %s", job_id, result.reason)
        return
    ws = result.ws
    eng.store.set_job(
        job_id,
        branch=ws.branch,
        worktree=str(ws.worktree),
        base=ws.base,
        base_branch=(job or {}).get("base_branch") or result.made_from,
    )
    eng.store.set_setting(setupmod.SETTING, pending or None)  # the Job owns it now
    del fresh
    job = eng.store.job(job_id)
    ok, why = eng.core.may_start()
    if (
        job is None
        or not jobtable.allows(jobtable.Event.START, job["state"])
        or eng.stopping
        or (not result.exempt and not ok)
        or (result.exempt and eng.core.paused)
    ):
        log.info(
            "job %s: set up, but not started now (%s)",
            job_id,
            "stopping" if eng.stopping else why or (job or {}).get("state"),
        )
        return
    runstart.launch(eng, job, result)
