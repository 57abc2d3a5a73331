"""The tray menu as plain data, built from the daemon's status document.

Keeping the menu a tree of frozen dataclasses (labels, enabled, checked,
and an `Action` naming what a click does: see items.py) means every label
and every greyed-out item is tested without a display; `owl.tray.app` only
turns the tree into pystray items and carries out the actions. The words
themselves are wording.py's, shared with the tooltip and the notices.

This module is pure: no clock (the status document carries every duration),
no I/O.
"""

from __future__ import annotations

from typing import Any

from owl.tray.items import SEPARATOR, Action, Item, verb
from owl.tray.wording import (
    outcome_word,
    queue_of,
    run_label,
    runs_of,
    short,
    span,
    status_line,
    why_stuck,
)

SHIFT_FOR_S = 3600.0
RECENT_SHOWN = 3
OUTCOME_MARK = {"succeeded": "✓", "failed": "✗", "interrupted": "■", "killed": "✗"}


def recent_item(entry: dict[str, Any]) -> Item:
    word = outcome_word(entry)
    run = f" (run {entry['run_id']})" if entry.get("run_id") is not None else ""
    by = f" ({entry['agent']})" if entry.get("agent") else ""
    label = (
        f"{OUTCOME_MARK.get(word, '·')} Job {entry.get('job_id')}: "
        f"{short(entry.get('title'), 32)} — {word}{run}{by}"
    )
    log = entry.get("log")
    return Item(label, Action("open", path=log) if log else None, enabled=bool(log))


def _job_log(status: dict[str, Any], job: dict[str, Any]) -> str | None:
    """The log of the Job's live Run, else of its latest finished one."""
    if job.get("log"):
        return str(job["log"])
    for run in runs_of(status):
        if run.get("job_id") == job.get("id") and run.get("log"):
            return str(run["log"])
    for entry in status.get("recent") or []:
        if entry.get("job_id") == job.get("id") and entry.get("log"):
            return str(entry["log"])
    return None


def _job_item(status: dict[str, Any], job: dict[str, Any]) -> Item:
    live = {r.get("job_id"): r for r in runs_of(status)}
    run = live.get(job.get("id"))
    state = run.get("state") if run else job.get("state")
    if state == "active":
        state = "running"
    label = f"{job.get('position')}. {short(job.get('title'), 34)} — {state}"
    worktree = job.get("worktree")
    log = _job_log(status, job)
    active = job.get("state") == "active" or run is not None
    sub = (
        Item(f"Job {job.get('id')} · {short(job.get('project'), 48)}", enabled=False),
        Item(
            "Open worktree",
            Action("open", path=worktree) if worktree else None,
            enabled=bool(worktree),
        ),
        Item("Show log", Action("open", path=log) if log else None, enabled=bool(log)),
        Item(
            "Drop (stops its Run)" if active else "Drop",
            verb("drop", job_id=job.get("id"), force=active),
        ),
    )
    return Item(label, submenu=sub)


BRIEFING_SHOWN_S = 3600.0  # the briefing tops the menu this long after the person came back
BRIEFING_MAX = 110


def _briefing_item(status: dict[str, Any]) -> list[Item]:
    """ "While you were away (2h 10m): …" atop the menu, for a while after coming
    back; a click opens the newest review page, when there is one."""
    brief = (status.get("notify") or {}).get("briefing") or {}
    if not brief.get("text") or (brief.get("age_s") or 0) > BRIEFING_SHOWN_S:
        return []
    review = brief.get("review")
    action = Action("review", args=(("job_id", review),)) if review else None
    return [Item(short(brief["text"], BRIEFING_MAX), action, enabled=action is not None)]


def _review_item(job: dict[str, Any]) -> Item:
    """A Job in review: what a person coming back does with it, one click each."""
    jid = job.get("id")
    worktree = job.get("worktree")
    base = job.get("base_branch")
    sub = (
        Item("Review", Action("review", args=(("job_id", jid),)), default=True),
        Item(
            "Open worktree",
            Action("open", path=worktree) if worktree else None,
            enabled=bool(worktree),
        ),
        Item("Accept", verb("accept", job_id=jid)),
        Item(
            f"Merge into {short(base, 24)}" if base else "Merge into its base branch",
            verb("accept", job_id=jid, merge=True),
        ),
        Item("Run checks again", verb("verify", job_id=jid), enabled=bool(worktree)),
        Item("Drop", verb("drop", job_id=jid, force=False)),
    )
    run = f" (run {job['run_id']})" if job.get("run_id") is not None else ""
    return Item(f"◆ Job {jid}: {short(job.get('title'), 32)} — ready for review{run}", submenu=sub)


def _stuck_item(job: dict[str, Any]) -> Item:
    """A blocked or exhausted Job: its run and reason, and what helps from here."""
    jid = job.get("id")
    worktree = job.get("worktree")
    run = f" (run {job['run_id']})" if job.get("run_id") is not None else ""
    sub = (
        Item(short(job.get("title"), 48), enabled=False),
        Item("Review", Action("review", args=(("job_id", jid),)), default=True),
        Item(
            "Open worktree",
            Action("open", path=worktree) if worktree else None,
            enabled=bool(worktree),
        ),
        Item("Run checks again", verb("verify", job_id=jid), enabled=bool(worktree)),
        Item("Accept anyway", verb("accept", job_id=jid, anyway=True), enabled=bool(worktree)),
        Item("Drop", verb("drop", job_id=jid, force=False)),
    )
    return Item(f"Job {jid} · {job.get('state')} · {why_stuck(job)}{run}", submenu=sub)


def _jobs_submenu(status: dict[str, Any]) -> tuple[Item, ...]:
    queue = queue_of(status)
    if not queue:
        return (Item("No jobs queued", enabled=False),)
    return tuple(_job_item(status, j) for j in queue)


def build_menu(
    status: dict[str, Any], *, autostart_on: bool = False, owns_daemon: bool = True
) -> tuple[Item, ...]:
    """The whole menu for one status document, top to bottom. `owns_daemon`:
    the daemon runs in the tray's process, so Quit stops both; a tray joined to
    a daemon elsewhere quits alone, and says so."""
    items: list[Item] = [
        *_briefing_item(status),
        Item(status_line(status), enabled=False, default=True),
    ]
    machine = status.get("machine") or {}
    shift = status.get("shift") or {}
    notes = []
    if shift and not shift.get("ended"):
        notes.append(
            "Shift · until the queue is empty"
            if shift.get("until_empty")
            else f"Shift · {span(shift.get('left_s'))} left"
        )
    early = (status.get("awake") or {}).get("sleeps_first") or {}
    sleeps = early and f"{early.get('source')} suspends the machine before Owl's idle.after"
    for note in (
        status.get("attention"),
        status.get("config_problem"),
        machine.get("problem"),
        sleeps,
    ):
        if note and note not in notes:
            notes.append("⚠ " + short(note, 60))
    items += [Item(n, enabled=False) for n in notes]

    runs = runs_of(status)
    if runs:
        items.append(SEPARATOR)
        # A live Run opens its log (when the status names one).
        items += [
            Item(
                run_label(r),
                Action("open", path=r["log"]) if r.get("log") else None,
                enabled=bool(r.get("log")),
            )
            for r in runs
        ]
    review = list(status.get("review") or [])
    stuck = list(status.get("stuck") or [])
    waiting = {j.get("id") for j in review + stuck}
    # a Job listed as waiting for the person is not listed again as a past Run
    recent = [e for e in status.get("recent") or [] if e.get("job_id") not in waiting]
    recent = recent[:RECENT_SHOWN]
    if recent or review or stuck:
        items.append(SEPARATOR)
        items += [_review_item(j) for j in review]
        items += [_stuck_item(j) for j in stuck]
        items += [recent_item(e) for e in recent]

    paused = bool(status.get("paused"))
    live = any(r.get("state") in ("running", "frozen", "freezing", "verifying") for r in runs)
    pending = any(q.get("state") == "pending" for q in queue_of(status))
    items.append(SEPARATOR)
    items.append(Item("Start", verb("start"), enabled=pending and not paused))
    items.append(Item("Resume", verb("resume")) if paused else Item("Pause", verb("pause")))
    items.append(Item("Work for 1 hour", verb("shift_start", for_s=SHIFT_FOR_S)))
    # as `owl stop`: each live Run is asked to end now, killed 5 s later
    items.append(Item("Stop", verb("stop", force=True), enabled=live))
    items.append(Item(f"Jobs ({len(queue_of(status))})", submenu=_jobs_submenu(status)))
    items.append(SEPARATOR)
    items.append(
        Item(
            "Start at login",
            Action("autostart", args=(("on", not autostart_on),)),
            checked=autostart_on,
        )
    )
    items.append(Item("Open config", Action("config")))
    items.append(Item("Quit" if owns_daemon else "Quit tray (the daemon goes on)", Action("quit")))
    return tuple(items)


def counting_down(status: dict[str, Any]) -> bool:
    """True while something in the menu changes every second."""
    return any(
        r.get("state") == "frozen" and r.get("grace_left_s") is not None for r in runs_of(status)
    )
