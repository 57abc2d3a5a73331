"""What the engine tells the notify room, as small events: it never waits on it.

Each function builds one `owl.notify.events` record from what the engine has in
hand and puts it on the notifier's queue (`eng.notifier`, None when there is
none); channels, git for a diffstat and the rules are the notify thread's.
Runs on the engine thread and takes the engine as `eng`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from owl.engine.state import State
    from owl.engine.live import Live

from owl.notify import events as ev

log = logging.getLogger("owl.engine")


def _emit(eng: State, event: ev.Event, at: float | None = None) -> None:
    notifier = getattr(eng, "notifier", None)
    if notifier is None:
        return
    try:
        notifier.emit(event, at)
    except Exception:  # never a reason for the engine to stop
        log.exception("could not hand an event to the notifier")


def run_ended(eng: State, lv: Live, state: str, wait: Any, at: float | None = None) -> None:
    """A Run ended (at `at`, epoch) and its Job is `state`; `wait`: the agent's new
    usage-limit wait, if any. Told once the Run's git work is done, so `at` keeps
    a Run that ended while the person was there out of the away spell."""
    try:
        job = eng.store.job(lv.job_id) or {}
    except Exception:  # a full disk or a locked file: say what is known
        job = {}
    report = lv.report
    usage = (report.usage if report is not None else None) or {}
    cost = usage.get("total_cost_usd")
    _emit(
        eng,
        ev.RunEnded(
            job_id=lv.job_id,
            run_id=lv.run_id,
            state=state,
            title=lv.title,
            reason=job.get("reason"),
            last_message=report.last_message if report is not None else None,
            checks=tuple((r.name, r.passed) for r in lv.results),
            cost=float(cost) if isinstance(cost, (int, float)) else None,
            billed=usage.get("billed") if isinstance(usage.get("billed"), bool) else None,
            project=str(lv.project),
            base=job.get("base"),
            branch=job.get("branch"),
            log=str(lv.log_path),
        ),
        at,
    )
    if wait is not None:
        _emit(eng, ev.LimitWait(wait.agent, wait.until, wait.reason, time.time(), wait.kind))


def limit_wait(eng: State, wait: Any) -> None:
    """An agent (or, as "budget", the whole queue) waits from now on: the headroom kept."""
    _emit(eng, ev.LimitWait(wait.agent, wait.until, wait.reason, time.time(), wait.kind))


def window(eng: State, agent: str, reading: Any) -> None:
    """An agent's window as it was just read (the briefing says how it moved)."""
    _emit(eng, ev.Window(agent, reading.window, reading.used, reading.seen))


def verified(eng: State, job: dict[str, Any], checks: list[tuple[str, bool]]) -> None:
    """A Job's checks, run again on demand, all passed: it is back in review."""
    _emit(
        eng,
        ev.RunEnded(
            job_id=int(job["id"]),
            run_id=0,
            state="review",
            title=str(job.get("title") or ""),
            checks=tuple(checks),
            project=str(job.get("project") or ""),
            base=job.get("base"),
            branch=job.get("branch"),
        ),
    )


def job_gone(eng: State, job_id: int) -> None:
    """The person dropped or accepted a Job: what was said of it is no news."""
    _emit(eng, ev.JobGone(job_id))


def untouchable(eng: State, lv: Live, procs: list[dict[str, Any]]) -> None:
    for p in procs:
        _emit(
            eng,
            ev.Untouchable(
                lv.job_id,
                lv.run_id,
                int(p.get("pid") or 0),
                str(p.get("command") or ""),
                str(p.get("why") or ""),
            ),
        )


def cap_stop(eng: State, lv: Live, reason: str) -> None:
    """A Run was stopped (or held) at one of its caps: memory, processes, the disk floor."""
    _emit(eng, ev.CapStop(lv.job_id, lv.run_id, lv.title, reason))


def disk_full(eng: State, where: str, detail: str) -> None:
    _emit(eng, ev.DiskFull(where, detail))


def uncontained(eng: State, problem: str) -> None:
    """Jobs wait because Runs cannot be contained here: told once a spell away."""
    _emit(eng, ev.Uncontained(problem))


def reading(eng: State, idle_for: float | None, locked: bool | None, now: float) -> None:
    """The machine as just read (its quiet, and whether the screen is locked):
    the notifier turns it into presence. The engine wakes when quiet would count
    as away, should that come after idle.after."""
    notifier = getattr(eng, "notifier", None)
    if notifier is None:
        return
    try:
        notifier.reading(idle_for, eng.cfg, locked=locked)
        after = notifier.away_for(eng.cfg)
    except Exception:
        log.exception("could not tell the notifier of the machine")
        return
    if idle_for is not None and idle_for < after and not locked:
        eng.recheck_at = min(eng.recheck_at, now + max(0.05, after - idle_for))
