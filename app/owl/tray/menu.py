"""The tray menu as plain data, built from the daemon's status document.

Keeping the menu a tree of frozen dataclasses (labels, enabled, checked,
and an `Action` naming what a click does) means every label and every
greyed-out item is tested without a display; `owl.tray.app` only turns the
tree into pystray items and carries out the actions.

This module is pure: no clock (the status document carries every duration),
no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from owl import textsafe
from owl.rules.timefmt import countdown, duration
from owl.rules.lifecycle import shown_outcome

SHIFT_FOR_S = 3600.0
RECENT_SHOWN = 3
TITLE_MAX = 40


@dataclass(frozen=True)
class Action:
    """What a click does.

    kind is one of:
    ``verb`` (ask the daemon: `verb` with `args`), ``open`` (open `path` with
    the desktop's opener), ``review`` (write the review page of Job
    `args` job_id and open it), ``autostart`` (turn start-at-login on if `args`
    has on=True, else off), ``config`` (open the config file), ``quit``.
    """

    kind: str
    verb: str | None = None
    args: tuple[tuple[str, Any], ...] = ()
    path: str | None = None

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)


@dataclass(frozen=True)
class Item:
    """One menu entry. A `submenu` makes it a cascade; `checked` a checkbox."""

    label: str
    action: Action | None = None
    enabled: bool = True
    checked: bool | None = None
    submenu: tuple["Item", ...] | None = None
    separator: bool = False
    default: bool = False  # shown bold; the heading of the menu

    def __post_init__(self) -> None:
        # Labels carry agent and repository text (titles, project paths):
        # one line, with nothing in it that a menu would act on.
        object.__setattr__(self, "label", textsafe.line(self.label))


SEPARATOR = Item("", separator=True, enabled=False)


def verb(name: str, **args: Any) -> Action:
    return Action("verb", verb=name, args=tuple(sorted(args.items())))


# ------------------------------------------------------------------ wording


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


def _runs(status: dict[str, Any]) -> list[dict[str, Any]]:
    return list(status.get("runs") or [])


def _queue(status: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(status.get("queue") or [], key=lambda q: q.get("position") or 0)


def _frozen(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in _runs(status) if r.get("state") == "frozen"]


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
    runs = _runs(status)
    failing = sum(len(r.get("not_stopped") or []) for r in runs if r.get("state") == "freezing")
    if failing:  # a freeze that left part of a Run running is never shown as frozen
        return f"NOT frozen: {failing} process{'' if failing == 1 else 'es'} still running"
    counting = [
        r
        for r in _frozen(status)
        if r.get("frozen_by") != "user" and r.get("grace_left_s") is not None
    ]
    if counting:
        r = min(counting, key=lambda r: r["grace_left_s"])
        return f"Frozen · {clock(r['grace_left_s'])} left"
    if status.get("paused"):
        return "Paused"
    if _frozen(status):
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
    pending = [q for q in _queue(status) if q.get("state") == "pending"]
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
    if not limits:
        return None
    if len(limits) > 1:  # every waiting agent: "claude until 08:10 · codex until 09:00"
        return "Waiting: " + " · ".join(
            f"{w.get('agent')} until {str(w.get('until') or '')[11:16]}" for w in limits
        )
    w = limits[0]
    what = "the model's service" if w.get("kind") == "service" else "the usage limit"
    return f"Waiting for {what} · until {until_words(w)}"


def until_words(w: dict[str, Any]) -> str:
    """When a wait ends, as the menu and notices say it: the daemon's words
    ("08:10", "Dec 3 08:10", past six days with its year), else the clock time."""
    text = w.get("until_text")
    return text if isinstance(text, str) and text else str(w.get("until") or "")[11:16]


def _run_label(run: dict[str, Any]) -> str:
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


_OUTCOME_MARK = {"succeeded": "✓", "failed": "✗", "interrupted": "■", "killed": "✗"}


def _recent_item(entry: dict[str, Any]) -> Item:
    word = outcome_word(entry)
    run = f" (run {entry['run_id']})" if entry.get("run_id") is not None else ""
    by = f" ({entry['agent']})" if entry.get("agent") else ""
    label = (
        f"{_OUTCOME_MARK.get(word, '·')} Job {entry.get('job_id')}: "
        f"{short(entry.get('title'), 32)} — {word}{run}{by}"
    )
    log = entry.get("log")
    return Item(label, Action("open", path=log) if log else None, enabled=bool(log))


def _job_log(status: dict[str, Any], job: dict[str, Any]) -> str | None:
    """The log of the Job's live Run, else of its latest finished one."""
    if job.get("log"):
        return str(job["log"])
    for run in _runs(status):
        if run.get("job_id") == job.get("id") and run.get("log"):
            return str(run["log"])
    for entry in status.get("recent") or []:
        if entry.get("job_id") == job.get("id") and entry.get("log"):
            return str(entry["log"])
    return None


def _job_item(status: dict[str, Any], job: dict[str, Any]) -> Item:
    live = {r.get("job_id"): r for r in _runs(status)}
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
    queue = _queue(status)
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
    for note in (status.get("attention"), status.get("config_problem"), machine.get("problem")):
        if note and note not in notes:
            notes.append("⚠ " + short(note, 60))
    items += [Item(n, enabled=False) for n in notes]

    runs = _runs(status)
    if runs:
        items.append(SEPARATOR)
        # A live Run opens its log (when the status names one).
        items += [
            Item(
                _run_label(r),
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
        items += [_recent_item(e) for e in recent]

    paused = bool(status.get("paused"))
    live = any(r.get("state") in ("running", "frozen", "freezing", "verifying") for r in runs)
    pending = any(q.get("state") == "pending" for q in _queue(status))
    items.append(SEPARATOR)
    items.append(Item("Start", verb("start"), enabled=pending and not paused))
    items.append(Item("Resume", verb("resume")) if paused else Item("Pause", verb("pause")))
    items.append(Item("Work for 1 hour", verb("shift_start", for_s=SHIFT_FOR_S)))
    # as `owl stop`: each live Run is asked to end now, killed 5 s later
    items.append(Item("Stop", verb("stop", force=True), enabled=live))
    items.append(Item(f"Jobs ({len(_queue(status))})", submenu=_jobs_submenu(status)))
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


def same_shape(a: tuple[Item, ...], b: tuple[Item, ...]) -> bool:
    """Whether menu `b` differs from `a` only in its words and in which items
    are greyed out: the same entries, doing the same things, the same checks.
    Such a menu is relabelled where it is, open or not (a menu on screen keeps
    the widgets it opened with); any other change makes a new one."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if (x.separator, x.action, x.checked, x.default, x.submenu is None) != (
            y.separator,
            y.action,
            y.checked,
            y.default,
            y.submenu is None,
        ):
            return False
        if x.submenu is not None and y.submenu is not None and not same_shape(x.submenu, y.submenu):
            return False
    return True


def find(items: tuple[Item, ...], label: str) -> Item | None:
    """The first item (searching submenus too) whose label is `label`."""
    for it in items:
        if it.label == label:
            return it
        if it.submenu:
            hit = find(it.submenu, label)
            if hit is not None:
                return hit
    return None


def counting_down(status: dict[str, Any]) -> bool:
    """True while something in the menu changes every second."""
    return any(
        r.get("state") == "frozen" and r.get("grace_left_s") is not None for r in _runs(status)
    )


__all__ = [
    "Action",
    "Item",
    "SEPARATOR",
    "build_menu",
    "status_line",
    "outcome_word",
    "clock",
    "span",
    "find",
    "same_shape",
    "counting_down",
]
