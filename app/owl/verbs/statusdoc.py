"""The `owl status` document: what the machine, the Runs and the queue look like now.

Built on the engine thread from a `Snapshot` the engine hands over
(`Engine.status`): its public state, read there and then, so nothing here
reaches into the engine's own fields. Pure reading: nothing here changes state.
Each part of the document has a function of its own (`machine`, `live_runs`,
`recent_runs`, `attention`, `awake`…); `status` puts them together.

The CLI imports the views, so this module imports nothing that starts or
signals processes at import time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from owl.engine.loop import AWAKE_WHY
from owl.idle import state as idle_policy
from owl.rules.jobtable import QUEUED
from owl.store.db import Store
from owl.verbs.views import iso, outside_lines

if TYPE_CHECKING:  # types only
    from owl.engine.live import Unrecorded
    from owl.engine.live import Live
    from owl.idle.machine import Reading
    from owl.power.base import Inhibitor
    from owl.rules.jobrules import Wait
    from owl.rules.lifecycle import Core
    from owl.settings.config import Config


@dataclass(frozen=True)
class Snapshot:
    """What the status document is made of, handed over by the engine on its
    thread: its public state, read there and then, so this module never reaches
    into the engine's own fields."""

    now: float  # the engine's clock
    reading: Reading  # the machine's last Reading
    cfg: Config  # the Config in force
    core: Core  # the lifecycle core: phases, windows, pause
    live: dict[int, Live]  # run id -> the engine's Live record
    store: Store
    inhibitor: Inhibitor[Any] | None  # the keep-awake backend, or None
    working: list[int]  # live Runs whose agents do work (hold the machine awake)
    shift: dict[str, Any] | None  # the Shift's view
    waits: dict[str, Wait]  # agents waiting out a usage limit, by agent
    waiting: str | None  # why the head of the queue waits; None with no queue
    config_problem: str | None
    unrecorded: list[Unrecorded]  # Runs ended while the disk was full, not yet written
    notify: dict | None = None  # the channels, presence and the briefing (owl.notify.service)


def status(e: Snapshot) -> dict:
    """The `owl status --json` document, built on the engine thread."""
    from owl import __version__
    from owl.engine import carryon

    runs = live_runs(e) + _unrecorded_runs(e)
    recent = recent_runs(e.store)
    stuck = stuck_jobs(e.store)
    sandbox = sandbox_view(e.cfg)
    return {
        "version": __version__,
        "machine": machine(e),
        "paused": e.core.paused,
        "shift": e.shift,
        "awake": awake(e),
        "runs": runs,
        "limits": carryon.limits_view(e.waits, time.time()),
        "queue": queue(e.store),
        "queue_length": e.store.queue_length(),  # waiting and working
        "queue_pending": e.store.pending_count(),  # waiting for a Run
        "waiting": e.waiting,
        "recent": recent,
        "review": review_jobs(e.store),
        "stuck": stuck,  # blocked and exhausted Jobs: they wait for the person
        "attention": attention(e.reading, runs, recent, stuck, sandbox),
        "notice": recent[0]["message"] if recent and recent[0]["message"] else None,
        "config_problem": e.config_problem,
        "notify": e.notify,
        "sandbox": sandbox,
        "login_path": login_path_view(),
    }


def login_path_view() -> dict | None:
    """When the daemon's start asked the login shell for PATH and got none
    (Owl.app opened from Finder: launchd's PATH finds no agent): what was
    tried, why it failed, the PATH used instead and the end of what the shell
    printed. None when not asked, or when it answered."""
    import os

    from owl.autostart.launchd import path_read

    read = path_read()
    if read is None or read.path is not None:
        return None
    return {
        "tried": read.tried,
        "why": read.why,
        "path": os.environ.get("PATH", ""),
        "said": read.said,
    }


def machine(e: Snapshot) -> dict:
    """Whether the machine counts as idle, for how long, and if not why."""
    r, cfg = e.reading, e.cfg
    idle_in = None
    after = idle_policy.quiet_enough(cfg.idle_after, r.locked)
    if r.idle_for is not None and r.idle_for < after:
        idle_in = after - r.idle_for
    return {
        "idle": not e.core.in_use and not e.core.on_battery,
        "idle_for_s": None if r.idle_for is None else round(min(r.idle_for, 1e7), 1),
        "on_ac_power": r.on_ac,
        "reason": _not_idle_because(e),
        "idle_in_s": None if idle_in is None else round(idle_in, 1),
        "detectors": r.backends,
        "problem": r.problem,
        "missing": r.missing,  # a permission the input hooks lack ("Input Monitoring")
        "permission": r.permission,  # ...and where to grant it, to whom
        "screen_locked": r.locked,
        "lock_sources": r.lock_sources,
    }


def _not_idle_because(e: Snapshot) -> str | None:
    """Why nothing may start now, as far as the machine goes; None when it may."""
    if e.core.on_battery:
        return "on battery"
    if e.reading.problem:
        return f"input cannot be read: {e.reading.problem}"
    if e.core.in_use:
        return "in use"
    if e.cfg.require_ac_power and e.reading.on_ac is None:
        return "power unknown"
    return None


def live_runs(e: Snapshot) -> list[dict]:
    """The Runs the engine holds now, with their phase and window."""
    now = e.now
    out = []
    for run in e.core.runs.values():
        lv = e.live.get(run.id)
        if lv is None:
            continue
        out.append(
            {
                "id": run.id,
                "job_id": lv.job_id,
                "title": lv.title,
                # a freeze that left some of it running is not "frozen"
                "state": "freezing" if run.state == "frozen" and lv.not_stopped else run.state,
                "check": run.checks[run.check][0] if run.check is not None else None,
                "frozen_by": run.frozen_by,
                "grace_left_s": run.grace_left(now),
                "grace_window_s": e.cfg.grace_window,
                "running_for_s": round(run.active_time(now), 1),
                "pids": lv.pids,
                "exempt": run.exempt,
                "log": str(lv.log_path),
                "agent": getattr(lv.driver, "name", None),
                "contained": lv.contained,
                # by name only: a value may be the secret itself
                "env_dropped": list(lv.env_dropped),
                "untouchable": list(getattr(lv, "untouchable", [])),
                "not_stopped": list(lv.not_stopped),
                # what it takes of the machine, and the cap that stopped or holds it
                "memory_bytes": lv.memory,
                "processes": lv.processes,
                "stopped": lv.capped or lv.disk_held,
            }
        )
    return out


def queue(store: Store) -> list[dict]:
    """The Jobs waiting their turn, in the order they will run."""
    keys = ("id", "position", "state", "title", "project", "worktree")
    return [{k: j[k] for k in keys} for j in store.jobs(QUEUED, limit=50)]


def recent_runs(store: Store) -> list[dict]:
    """The last five Runs that ended, newest first, with what they mean; the
    Runs of a dropped Job are forgotten (its work is gone: nothing to look at)."""
    out: list[dict] = []
    for row in store.recent_runs(20):
        job = store.job(row["job_id"])
        if job is None or job["state"] == "cancelled":
            continue  # dropped: the person is done with it
        if len(out) == 5:
            break
        out.append(
            {
                "run_id": row["id"],
                "job_id": row["job_id"],
                "title": job["title"] if job else "",
                "outcome": row["outcome"],
                "ended_by": row["ended_by"],
                "reason": row["reason"],
                "ended_at": iso(row["ended_at"]),
                "log": row["log"],
                "untouchable": _still_there(row.get("untouchable")),
                "message": _run_message(store, row),
                "outside": outside_lines(row.get("outside")),
                "agent": row.get("agent"),
            }
        )
    return out


def review_jobs(store: Store) -> list[dict]:
    """The Jobs whose work waits for the person's review."""
    keys = ("id", "title", "branch", "worktree")
    return [
        {
            **{k: j[k] for k in keys},
            "base_branch": j.get("base_branch"),
            **_last_run_of(store, j["id"]),
        }
        for j in store.jobs(("review",), limit=50)
    ]


def stuck_jobs(store: Store) -> list[dict]:
    """Blocked and exhausted Jobs: they wait for the person, with why."""
    keys = ("id", "state", "title", "reason", "worktree")
    return [
        {**{k: j[k] for k in keys}, **_last_run_of(store, j["id"])}
        for j in store.jobs(("blocked", "exhausted"), limit=20)
    ]


def attention(
    r: Reading,
    runs: list[dict],
    recent: list[dict],
    stuck: list[dict],
    sandbox: dict | None = None,
) -> str | None:
    """The one thing the person should know first, or None."""
    unrecorded = next((run for run in runs if run.get("unrecorded")), None)
    if unrecorded is not None:
        return (
            f"run {unrecorded['id']} of job {unrecorded['job_id']} ended at "
            f"{unrecorded['ended_at']}; the disk is full, so its end is written when there is room"
        )
    if sandbox and sandbox.get("waits"):
        return str(sandbox["line"])
    if r.problem:
        return f"the machine cannot be read: {r.problem}"
    if r.permission:
        return r.permission
    last = recent[0] if recent else None
    if last is None:
        return None
    if last["outcome"] == "failed" and last["job_id"] in {j["id"] for j in stuck}:
        # said only while its Job waits for the person: a failed Run whose Job
        # runs again, or went to review since, is no longer news
        return f"job {last['job_id']} failed: {last['reason']}"
    if last["ended_by"] == "sigkill":
        return f"job {last['job_id']}'s agent was killed"
    return None


def awake(e: Snapshot) -> dict:
    """Whether the machine is held awake for the Runs, by what, and why."""
    view: dict[str, Any] = {
        "enabled": e.cfg.keep_awake,
        "held": False,
        "backend": "none",
        "problem": None,
        "why": None,
        "runs": [],
        "hold_while_queued": e.cfg.hold_while_queued,
        "sleeps_first": sleeps_first(e.cfg.idle_after),
    }
    if e.inhibitor is not None and e.cfg.keep_awake:
        held = e.inhibitor.held
        working = list(e.working) if held else []
        why = _awake_why(working)
        if held and not working and e.cfg.hold_while_queued:
            why = "Jobs wait, on AC (power.hold_while_queued)"
        view.update(
            held=held,
            backend=e.inhibitor.backend,
            problem=e.inhibitor.problem,
            runs=working,
            why=why if held else None,
        )
    return view


def sleeps_first(idle_after: float) -> dict | None:
    """The desktop's own suspend-on-idle timer, where it fires at or before
    idle.after (as last read, off this thread: `owl.power.sleeptimer`)."""
    from owl.power import sleeptimer

    t = sleeptimer.first_before(sleeptimer.cached(), idle_after)
    if t is None:
        return None
    return {
        "source": t.source,
        "after_s": t.after_s,
        "setting": t.setting,
        "fix": t.fix,
        "text": sleeptimer.words(t, idle_after),
    }


def sandbox_view(cfg: Config) -> dict:
    """Whether Runs are contained here, and if not why and what fixes it: the
    last answer of bwrap's probe (asked at the daemon's start, and again while
    Jobs wait for it: no process here). `waits`: Runs must be contained
    (`required`, the default on Linux), so Jobs wait; `line` says so in one line."""
    from owl.sandbox import keys, ready

    mode = keys.settings_from(cfg.sandbox or {}).mode
    why = None if mode == "off" else ready.problem()
    waits = mode == "required" and why is not None
    if why is None:
        line = None if mode != "off" else 'Runs are not contained (sandbox.mode = "off")'
    elif waits:
        line = ready.waiting_words(why)
    else:
        line = f'Runs are not contained: {why} (sandbox.mode = "auto")'
    return {
        "mode": mode,
        "contained": mode != "off" and why is None,
        "problem": why,
        "waits": waits,
        "line": line,
    }


def _last_run_of(store: Any, job_id: int) -> dict:
    """The latest Run of a Job waiting for the person: its id and why it ended."""
    run = store.last_run(job_id)
    if run is None:
        return {"run_id": None, "run_reason": None}
    return {"run_id": run["id"], "run_reason": run["reason"]}


def _unrecorded_runs(e: Snapshot) -> list[dict]:
    """Runs that ended while the disk was full, not yet written: `ending`, as the
    database says while their record waits, so `owl status` and `owl jobs` agree."""
    out = []
    for args, _spent, info in e.unrecorded:
        out.append(
            {
                "id": args[0],
                "job_id": info["job_id"],
                "title": info["title"],
                "state": "ending",
                "unrecorded": True,
                "outcome": args[1],
                "ended_at": iso(args[5]),
                "check": None,
                "frozen_by": None,
                "grace_left_s": None,
                "grace_window_s": e.cfg.grace_window,
                "running_for_s": None,
                "pids": [],
                "exempt": False,
                "log": info["log"],
                "untouchable": [],
            }
        )
    return out


def _still_there(procs: list[dict] | None) -> list[dict]:
    """Of the processes a finished Run left behind because Owl may not signal
    them, those still running (while the pid still runs the same command)."""
    import psutil

    out = []
    for p in procs or []:
        try:
            line = " ".join(psutil.Process(int(p["pid"])).cmdline())
        except (psutil.Error, ValueError, KeyError):
            continue
        if line and (p.get("command") or "")[:100] == line[:100]:
            out.append(p)
    return out


def _awake_why(run_ids: list[int]) -> str:
    """Why the machine is kept awake, in words, for `owl status`."""
    if not run_ids:
        return AWAKE_WHY
    if len(run_ids) == 1:
        return f"run {run_ids[0]} is working"
    return f"runs {', '.join(map(str, run_ids))} are working"


def _run_message(store: Store, run: dict) -> str | None:
    """What a finished Run means to the person, in one line (the tray's notice)."""
    from owl.engine import checks as checksmod

    if run["outcome"] != "succeeded":
        return None
    passed = sum(1 for c in store.checks(run["id"]) if c["outcome"] == "passed")
    return checksmod.review_message(run["job_id"], passed)
