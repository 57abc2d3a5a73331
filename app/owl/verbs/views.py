"""What people read of Jobs: a Job's history and the lists of `owl jobs`.

Built on the engine thread (`Engine.job_view`) and, when no daemon runs, by
the CLI from the database. Pure reading: nothing here changes state. The
status document, from the engine's snapshot, is `statusdoc`.

The CLI imports this module, so it imports nothing that starts or signals
processes: what runs git (`add_git_facts`) or knows the checks and the agents'
records imports them when it is called.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from owl.review.text import last_message
from owl.rules import money
from owl.rules.attempts import attempt_numbers
from owl.store.db import Store
from owl.rules.jobtable import ENDED, NEEDS_YOU, QUEUED, STATES, State


LATER = "_later"  # a key of an answer: a callable(answer) -> answer, run off the engine


def with_unrecorded(unrecorded: list, view: dict) -> dict:
    """A Job's view with its Runs that ended while the disk was full shown as
    `ending`, with the time they ended, as `owl status` shows them."""
    waiting = {args[0]: args for args, _spent, _info in unrecorded}
    for run in view.get("runs") or []:
        args = waiting.get(run["id"])
        if args is not None:
            run.update(state="ending", unrecorded=True, ended_at=iso(args[5]))
    return view


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
            # from start to end, unrounded: the review page's figure too
            "duration_s": (
                round(r["ended_at"] - r["started_at"], 3)
                if r["ended_at"] is not None and r["started_at"] is not None
                else None
            ),
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
    costly = [u for u in got if isinstance(u.get("total_cost_usd"), (int, float))]
    if costly:  # whether the sum is a bill: when every Run with a cost says the same
        out["billed"] = money.job_billed([money.billed_of(u) for u in costly])
    return out


def _job_limit(store: Store, job: dict) -> dict | None:
    """The usage-limit wait that holds this Job back, if it is queued behind one."""
    if job["state"] not in QUEUED:
        return None
    now = time.time()
    day = store.setting("budget_day")  # the day's money is spent (owl.engine.budgeting)
    if isinstance(day, dict) and isinstance(day.get("until"), (int, float)) and day["until"] > now:
        return {
            "agent": None,
            "kind": str(day.get("kind") or "budget"),
            "until": iso(day["until"]),
            "reason": str(day.get("reason") or ""),
        }
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
    from owl.git.outsidewords import describe

    return [describe(c) for c in found or [] if isinstance(c, dict)]
