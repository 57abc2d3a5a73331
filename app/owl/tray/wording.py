"""The tray's words for the daemon's status document: the line atop the menu,
a Run's label, a wait, an outcome, a reason a Job is stuck.

Apart from the menu's items because the icon's tooltip and the tray's
notices say the same things in the same words. Pure: no clock (the status
document carries every duration), no I/O.
"""

from __future__ import annotations

from typing import Any

from owl import textsafe
from owl.rules.lifecycle import shown_outcome
from owl.rules.timefmt import countdown, duration

TITLE_MAX = 40


def clock(seconds: float | None) -> str:
    """A countdown in Owl's one duration style: 13m 42s, 1h 2m. Never negative."""
    return countdown(seconds or 0.0)


def span(seconds: float | None) -> str:
    """A coarse duration for things that are not counting down: 40s, 4m, 1h 5m."""
    return duration(seconds or 0.0, coarse=True)


def short(title: str | None, limit: int = TITLE_MAX) -> str:
    """`title` on one line, its control characters made visible, cut to `limit`."""
    t = textsafe.line(" ".join((title or "").split()))
    return t if len(t) <= limit else t[: limit - 1].rstrip() + "…"


def runs_of(status: dict[str, Any]) -> list[dict[str, Any]]:
    return list(status.get("runs") or [])


def queue_of(status: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(status.get("queue") or [], key=lambda q: q.get("position") or 0)


def frozen_runs(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in runs_of(status) if r.get("state") == "frozen"]


def need_you(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Job that waits for the person: in review, blocked or exhausted."""
    return list(status.get("review") or []) + list(status.get("stuck") or [])


def need_you_words(n: int) -> str:
    return f"{n} needs you" if n == 1 else f"{n} need you"


def status_line(status: dict[str, Any]) -> str:
    """The one line at the top of the menu (and in the tooltip): what Owl does,
    and how many Jobs wait for the person ("Nothing to do" never hides them)."""
    line = _doing_line(status)
    missing = (status.get("machine") or {}).get("missing")
    if missing:  # the keyboard is heard only through the idle time: said first
        line = f"{missing} not granted · {line}"
    n = len(need_you(status))
    if not n:
        return line
    return need_you_words(n) if line == "Nothing to do" else f"{line} · {need_you_words(n)}"


def _doing_line(status: dict[str, Any]) -> str:
    runs = runs_of(status)
    failing = sum(len(r.get("not_stopped") or []) for r in runs if r.get("state") == "freezing")
    if failing:  # a freeze that left part of a Run running is never shown as frozen
        return f"NOT frozen: {failing} process{'' if failing == 1 else 'es'} still running"
    counting = [
        r
        for r in frozen_runs(status)
        if r.get("frozen_by") != "user" and r.get("grace_left_s") is not None
    ]
    if counting:
        r = min(counting, key=lambda r: r["grace_left_s"])
        return f"Frozen · {clock(r['grace_left_s'])} left"
    if status.get("paused"):
        return "Paused"
    if frozen_runs(status):
        return "Frozen"
    working = [r for r in runs if r.get("state") in ("running", "verifying")]
    if len(working) == 1:
        r = working[0]
        what = "Checking" if r.get("state") == "verifying" else "Working on"
        return f"{what} job {r.get('job_id')} · {span(r.get('running_for_s'))}"
    if working:
        return f"Working on {len(working)} jobs"
    if any(r.get("state") == "ending" for r in runs):
        return "Ending"
    machine = status.get("machine") or {}
    pending = [q for q in queue_of(status) if q.get("state") == "pending"]
    if not pending:
        return "Nothing to do"
    limit = limit_line(status)
    if limit:
        return limit
    shift = status.get("shift") or {}
    if shift and not shift.get("ended"):
        return "Working shift · " + (status.get("waiting") or "starting")
    if machine.get("idle"):
        return "Waiting: " + (status.get("waiting") or "starting soon")
    idle_in = machine.get("idle_in_s")
    reason = machine.get("reason")
    if idle_in is not None and reason in (None, "in use"):
        return f"Idle in {span(idle_in)}"
    return "Waiting: " + (reason or status.get("waiting") or "for the machine")


def limit_line(status: dict[str, Any]) -> str | None:
    """'Waiting for the usage limit · until 08:10' while an agent waits one out."""
    limits = status.get("limits") or []
    held = (status.get("budget") or {}).get("held")
    if isinstance(held, dict) and held.get("reason"):  # the day's money is spent
        return f"Waiting: {held['reason']}"
    if not limits:
        return None
    if len(limits) > 1:  # every waiting agent: "claude until 08:10 · codex until 09:00"
        return "Waiting: " + " · ".join(
            f"{w.get('agent')} until {str(w.get('until') or '')[11:16]}" for w in limits
        )
    w = limits[0]
    if str(w.get("kind") or "").startswith("budget:"):  # the headroom kept for the person
        return str(w.get("reason") or "")
    what = "the model's service" if w.get("kind") == "service" else "the usage limit"
    return f"Waiting for {what} · until {until_words(w)}"


def until_words(w: dict[str, Any]) -> str:
    """When a wait ends, as the menu and notices say it: the daemon's words
    ("08:10", "Dec 3 08:10", past six days with its year), else the clock time."""
    text = w.get("until_text")
    return text if isinstance(text, str) and text else str(w.get("until") or "")[11:16]


def run_label(run: dict[str, Any]) -> str:
    head = f"Job {run.get('job_id')}: {short(run.get('title'), 32)}"
    state = run.get("state")
    if state == "frozen":
        left = run.get("grace_left_s")
        word = "paused" if run.get("frozen_by") == "user" else "frozen"
        # a paused Run's window runs too: a forgotten pause still ends it
        tail = word if left is None else f"{word} · {clock(left)} left"
    elif state == "freezing":
        n = len(run.get("not_stopped") or [])
        tail = f"NOT frozen: {n} process{'' if n == 1 else 'es'} still running"
    elif state == "ending":
        tail = "ending"
    elif state == "verifying":
        tail = f"checking {run['check']}" if run.get("check") else "checking"
    else:
        tail = f"running · {span(run.get('running_for_s'))}"
    if run.get("agent"):
        tail = f"{run['agent']} {tail}"  # which agent does this Run
    return f"{head} — {tail}"


def outcome_word(entry: dict[str, Any]) -> str:
    """succeeded / failed / interrupted, or killed (lifecycle's one rule)."""
    return shown_outcome(entry.get("outcome"), entry.get("ended_by"))


def why_stuck(job: dict[str, Any]) -> str:
    """A blocked or exhausted Job's reason, short: its last Run's ("check unit
    failed (exit 4)"), else its own."""
    why = (
        job.get("run_reason")
        or job.get("reason")
        or ("its attempts are used up" if job.get("state") == "exhausted" else "see owl jobs show")
    )
    why = " ".join(str(why).split())
    if len(why) > 44 and ": " in why:
        why = why.split(": ", 1)[0]
    return short(why, 44)
