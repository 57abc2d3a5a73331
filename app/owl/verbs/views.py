"""What people read: the status document and a Job's history, from the engine's state.

Built on the engine thread from a `Snapshot` the engine hands over
(`Engine.status`, `Engine.job_view`), and, for `job_view`, by the CLI from the
database when no daemon runs. Pure reading: nothing here changes state.

The CLI imports this module, so it imports nothing that starts or signals
processes: what runs git (`add_git_facts`) or knows the checks and the agents'
records imports them when it is called.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from owl.idle import state as idle_policy
from owl.review.text import last_message
from owl.rules.attempts import attempt_numbers
from owl.store.db import Store
from owl.rules.jobtable import ENDED, NEEDS_YOU, QUEUED, STATES, State

if TYPE_CHECKING:  # types only: the CLI imports this module
    from owl.engine.runend import Unrecorded
    from owl.engine.runstart import Live
    from owl.idle.machine import Reading
    from owl.power.base import Inhibitor
    from owl.rules.jobrules import Wait
    from owl.rules.lifecycle import Core
    from owl.settings.config import Config

AWAKE_WHY = "an agent is working"


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
    from owl.engine import carryon

    now = e.now
    r = e.reading
    cfg = e.cfg
    idle_in = None
    after = idle_policy.quiet_enough(cfg.idle_after, r.locked)
    if r.idle_for is not None and r.idle_for < after:
        idle_in = after - r.idle_for
    machine_reason = None
    if e.core.on_battery:
        machine_reason = "on battery"
    elif r.problem:
        machine_reason = f"input cannot be read: {r.problem}"
    elif e.core.in_use:
        machine_reason = "in use"
    elif cfg.require_ac_power and r.on_ac is None:
        machine_reason = "power unknown"
    runs = []
    for run in e.core.runs.values():
        lv = e.live.get(run.id)
        if lv is None:
            continue
        runs.append(
            {
                "id": run.id,
                "job_id": lv.job_id,
                "title": lv.title,
                "state": run.state,
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
                "untouchable": list(getattr(lv, "untouchable", [])),
            }
        )
    runs += _unrecorded_runs(e)
    queue_ = [
        {
            "id": j["id"],
            "position": j["position"],
            "state": j["state"],
            "title": j["title"],
            "project": j["project"],
            "worktree": j["worktree"],
        }
        for j in e.store.jobs(QUEUED, limit=50)
    ]
    recent = []
    for row in e.store.recent_runs(5):
        job = e.store.job(row["job_id"])
        recent.append(
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
                "message": _run_message(e.store, row),
                "outside": outside_lines(row.get("outside")),
                "agent": row.get("agent"),
            }
        )
    review = [
        {
            "id": j["id"],
            "title": j["title"],
            "branch": j["branch"],
            "worktree": j["worktree"],
            "base_branch": j.get("base_branch"),
            **_last_run_of(e.store, j["id"]),
        }
        for j in e.store.jobs(("review",), limit=50)
    ]
    stuck = [
        {
            "id": j["id"],
            "state": j["state"],
            "title": j["title"],
            "reason": j["reason"],
            "worktree": j["worktree"],
            **_last_run_of(e.store, j["id"]),
        }
        for j in e.store.jobs(("blocked", "exhausted"), limit=20)
    ]
    attention = None
    waiting_ids = {j["id"] for j in stuck}
    if r.problem:
        attention = f"the machine cannot be read: {r.problem}"
    elif recent and recent[0]["outcome"] == "failed" and recent[0]["job_id"] in waiting_ids:
        # said only while its Job waits for the person: a failed Run whose Job
        # runs again, or went to review since, is no longer news
        attention = f"job {recent[0]['job_id']} failed: {recent[0]['reason']}"
    elif recent and recent[0]["ended_by"] == "sigkill":
        attention = f"job {recent[0]['job_id']}'s agent was killed"
    if any(run.get("unrecorded") for run in runs):
        first = next(run for run in runs if run.get("unrecorded"))
        attention = (
            f"run {first['id']} of job {first['job_id']} ended at {first['ended_at']}; "
            "the disk is full, so its end is written when there is room"
        )
    awake: dict[str, Any] = {
        "enabled": cfg.keep_awake,
        "held": False,
        "backend": "none",
        "problem": None,
        "why": None,
        "runs": [],
    }
    if e.inhibitor is not None and cfg.keep_awake:
        held = e.inhibitor.held
        working = list(e.working) if held else []
        awake.update(
            held=held,
            backend=e.inhibitor.backend,
            problem=e.inhibitor.problem,
            runs=working,
            why=_awake_why(working) if held else None,
        )
    from owl import __version__

    return {
        "version": __version__,
        "machine": {
            "idle": not e.core.in_use and not e.core.on_battery,
            "idle_for_s": None if r.idle_for is None else round(min(r.idle_for, 1e7), 1),
            "on_ac_power": r.on_ac,
            "reason": machine_reason,
            "idle_in_s": None if idle_in is None else round(idle_in, 1),
            "detectors": r.backends,
            "problem": r.problem,
            "screen_locked": r.locked,
            "lock_sources": r.lock_sources,
        },
        "paused": e.core.paused,
        "shift": e.shift,
        "awake": awake,
        "runs": runs,
        "limits": carryon.limits_view(e.waits, time.time()),
        "queue": queue_,
        "queue_length": e.store.queue_length(),
        "waiting": e.waiting,
        "recent": recent,
        "review": review,
        "stuck": stuck,  # blocked and exhausted Jobs: they wait for the person
        "attention": attention,
        "notice": recent[0]["message"] if recent and recent[0]["message"] else None,
        "config_problem": e.config_problem,
        "notify": e.notify,
        "sandbox": sandbox_view(cfg),
    }


def sandbox_view(cfg: Config) -> dict:
    """Whether Runs are contained here, and if not why and what fixes it (asked of
    bwrap once at the daemon's start: no process here)."""
    from owl.sandbox import bwrap

    mode = str((cfg.sandbox or {}).get("mode", "auto"))
    why = None if mode == "off" else bwrap.probe()
    return {"mode": mode, "contained": mode != "off" and why is None, "problem": why}


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


def with_unrecorded(unrecorded: list, view: dict) -> dict:
    """A Job's view with its Runs that ended while the disk was full shown as
    `ending`, with the time they ended, as `owl status` shows them."""
    waiting = {args[0]: args for args, _spent, _info in unrecorded}
    for run in view.get("runs") or []:
        args = waiting.get(run["id"])
        if args is not None:
            run.update(state="ending", unrecorded=True, ended_at=iso(args[5]))
    return view


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


def iso(ts: float | None) -> str | None:
    """A wall-clock time as people and scripts read it (local, to the second)."""
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def job_view(store: Store, job: dict, git: bool = True) -> dict:
    """A Job as `owl jobs show --json` gives it (also used without a daemon).

    Without `git`, the facts only git can give (commits, diffstat, files) are
    left for `add_git_facts`: the daemon adds them off the engine thread."""
    from owl.engine import checks as checksmod

    runs = [
        {
            "id": r["id"],
            "attempt": r["attempt"],
            "state": r["state"],
            "outcome": r["outcome"],
            "ended_by": r["ended_by"],
            "reason": r["reason"],
            "exit_code": r["exit_code"],
            "started_at": iso(r["started_at"]),
            "ended_at": iso(r["ended_at"]),
            "log": r["log"],
            "untouchable": r.get("untouchable") or [],
            "outside": r.get("outside"),
            "outside_text": outside_lines(r.get("outside")),
            "session_id": r["session_id"],
            "resumed": None if r["resumed"] is None else bool(r["resumed"]),
            "usage": r["usage"],
            "last_message": r["last_message"],
            "agent": r.get("agent") or (job["agent"] or "").split(",")[0],
            "contained": r.get("contained"),
        }
        for r in store.runs(job["id"])
    ]
    view = {
        k: job[k]
        for k in (
            "id",
            "state",
            "position",
            "branch",
            "worktree",
            "attempts_left",
            "attempts",
            "prompt",
            "project",
            "agent",
            "base",
            "reason",
            "title",
        )
    }
    view["created_at"] = iso(job["created_at"])
    for r, n in zip(runs, attempt_numbers(runs)):
        r["attempt"] = n
        r["checks"] = [checksmod.view(c) for c in store.checks(r["id"])]
    view["runs"] = runs
    view["last_message"] = _last_message(store.runs(job["id"]))
    view["usage"] = usage_sum([r["usage"] for r in runs])
    view["replies"] = [
        {"text": r["text"], "at": iso(r["at"]), "run_id": r["run_id"]}
        for r in store.replies(job["id"])
    ]
    view["limit"] = _job_limit(store, job)
    last = next((r for r in reversed(runs) if r["outcome"] == "succeeded"), None)
    if last is not None:
        n = len(last["checks"])
        view["verified"] = n > 0
        view["verification"] = (
            f"{n} check{'s' if n != 1 else ''} passed on run {last['id']}"
            if n
            else "not verified: the project declares no checks (.owl.toml on its base branch)"
        )
    again = store.verification(job["id"])
    if again:
        view["verify"] = {
            "checks": [checksmod.view(c) for c in again],
            "passed": all(c["outcome"] == "passed" for c in again),
            "ended_at": iso(max(c["ended_at"] for c in again)),
        }
    if git:
        add_git_facts(view, job)
    return view


def add_git_facts(view: dict, job: dict) -> dict:
    """The commits, diffstat and files of a Job's branch (runs git: slow for a large
    branch, so never on the engine thread)."""
    import subprocess

    from owl.git import workspace
    from owl.review import facts as review_facts

    if job["branch"] and job["base"]:
        try:
            project = Path(job["project"])
            view["commits"] = workspace.commits_since(project, job["base"], job["branch"])
            view["diffstat"] = workspace.diff_stat(project, job["base"], job["branch"])
            view["files"] = review_facts.files(project, job["base"], job["branch"])
        except (OSError, workspace.WorkspaceError, subprocess.SubprocessError):
            pass  # the project moved or is gone: the Job's record still shows
    return view


def jobs_list(store: Store, everything: bool) -> list[dict]:
    """`owl jobs`: the Jobs, the queue first by position, then the rest by id
    (so `--all` reads in order); by the daemon, or by the CLI when none runs."""
    states = None if everything else (*QUEUED, *NEEDS_YOU)
    return _in_list_order([_listed(j) for j in store.jobs(states)])


def jobs_page(store: Store, everything: bool, limit: int) -> dict[str, Any]:
    """`owl jobs` on one screen: at most `limit` of `jobs_list`'s Jobs, in its
    order, and how many more there are ({"jobs": [...], "more": N}).

    With more Jobs than that, the page holds the most relevant ones: the live
    Runs' Jobs, then those that wait for the person (review, blocked,
    exhausted), newest first, then the head of the queue, then (with
    `everything`) the newest of the done and cancelled. Each is read with a
    LIMIT, so a queue of 10,000 costs what a page does."""
    states = STATES if everything else (*QUEUED, *NEEDS_YOU)
    counts = store.counts()
    total = sum(counts.get(s, 0) for s in states)
    if total <= limit:
        return {"jobs": jobs_list(store, everything), "more": 0}
    picked: dict[int, dict] = {}
    sources = [
        lambda n: store.newest_jobs((State.ACTIVE.value,), n),
        lambda n: store.newest_jobs(NEEDS_YOU, n),
        lambda n: store.jobs(QUEUED, limit=n),
    ]
    if everything:
        sources.append(lambda n: store.newest_jobs(ENDED, n))
    for source in sources:
        room = limit - len(picked)
        if room <= 0:
            break
        for j in source(room + len(picked)):  # (some may be picked already)
            if len(picked) < limit:
                picked.setdefault(j["id"], j)
    jobs = _in_list_order([_listed(j) for j in picked.values()])
    return {"jobs": jobs, "more": total - len(jobs)}


LISTED = ("id", "state", "position", "title", "project", "agent", "attempts_left", "branch")


def _listed(j: dict) -> dict:
    return {**{k: j[k] for k in (*LISTED, "reason")}, "created_at": iso(j["created_at"])}


def _in_list_order(jobs: list[dict]) -> list[dict]:
    return sorted(jobs, key=lambda j: (j["position"] is None, j["position"] or 0, j["id"]))


USAGE_SUMMED = (
    "duration_ms",
    "num_turns",
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "total_cost_usd",
)


def usage_sum(usages: list[dict | None]) -> dict | None:
    """What a Job's Runs cost together (None when no Run reported any)."""
    got = [u for u in usages if u]
    if not got:
        return None
    out: dict[str, Any] = {}
    for key in USAGE_SUMMED:
        values = [u[key] for u in got if isinstance(u.get(key), (int, float))]
        out[key] = (
            (round(sum(values), 6) if key == "total_cost_usd" else sum(values)) if values else None
        )
    return out


def _job_limit(store: Store, job: dict) -> dict | None:
    """The usage-limit wait that holds this Job back, if it is queued behind one."""
    if job["state"] not in QUEUED:
        return None
    now = time.time()
    for w in store.limits():
        if w["agent"] == (job["agent"] or "").split(",")[0] and w["until"] > now:
            return {
                "agent": w["agent"],
                "kind": w["kind"],
                "until": iso(w["until"]),
                "reason": w["reason"],
            }
    return None


def _last_message(runs: list[dict]) -> str | None:
    """The agent's own last words: of the latest Run that left any."""
    from owl.review import facts as review_facts

    for run in reversed(runs):
        said = run.get("last_message") or last_message(
            review_facts.read_tail(run.get("log"), 1 << 20)
        )
        if said:
            return said
    return None


def outside_lines(found: list | None) -> list[str]:
    """What a Run changed outside its branch, one line each (`moved main from … to …`)."""
    from owl.git.outside import describe

    return [describe(c) for c in found or [] if isinstance(c, dict)]


def _run_message(store: Store, run: dict) -> str | None:
    """What a finished Run means to the person, in one line (the tray's notice)."""
    from owl.engine import checks as checksmod

    if run["outcome"] != "succeeded":
        return None
    passed = sum(1 for c in store.checks(run["id"]) if c["outcome"] == "passed")
    return checksmod.review_message(run["job_id"], passed)
