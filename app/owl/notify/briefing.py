"""The briefing: what happened during one away spell, as one line.

Pure: the spell is built from the events the notify thread saw while the person
was away, and `summary` writes it; nothing here reads a clock (the caller gives
`now`, and `hhmm` turns an epoch into the local "08:10").

    While you were away (2h 10m): 3 Runs · job 12 ready for review ·
    job 14 blocked (check unit failed) · $0.84 · claude five-hour 40% → 78%,
    seven-day 31% → 44% · claude waits until 08:10

On a subscription the dollars are the API-equivalent its agent reported, not a
bill: "$1.84 (API-equivalent, not billed)" (`owl.rules.money`).

`spent` is what the spell cost on its own ("3 Jobs ran · $1.84 · claude
five-hour 40% → 78%, seven-day 31% → 44%"): the phone's morning digest
carries it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from owl import textsafe
from owl.notify import events as ev
from owl.rules import money
from owl.rules.budget import night_words
from owl.rules.timefmt import duration

REASON_MAX = 80


def local_hhmm(t: float) -> str:
    return time.strftime("%H:%M", time.localtime(t))


@dataclass
class Spell:
    """One away spell, from `since` (epoch), and what happened in it."""

    since: float
    runs: int = 0
    cost: float = 0.0
    billed: float = 0.0  # of `cost`, what the agents said is a bill (an API key's)
    unbilled: float = 0.0  # of `cost`, a subscription's API-equivalent, not billed
    jobs: dict[int, tuple[str, str | None]] = field(default_factory=dict)  # id -> (state, why)
    waits: dict[str, float] = field(default_factory=dict)  # agent -> until
    held: dict[str, str] = field(default_factory=dict)  # agent -> the headroom's words
    first: dict[str, float] = field(default_factory=dict)  # "agent window" -> used at first
    last: dict[str, float] = field(default_factory=dict)  # "agent window" -> used at last
    untouchable: int = 0
    disk_full: bool = False
    uncontained: bool = False  # Jobs waited: Runs could not be contained
    review_order: list[int] = field(default_factory=list)  # newest last

    def add(self, event: ev.Event) -> None:
        if isinstance(event, ev.RunEnded):
            self.runs += 1 if event.run_id else 0  # Run 0: checks run again, no Run
            self.cost += event.cost or 0.0
            if event.billed is True:
                self.billed += event.cost or 0.0
            elif event.billed is False:
                self.unbilled += event.cost or 0.0
            self.jobs[event.job_id] = (event.state, event.reason)
            if event.state == "review":
                if event.job_id in self.review_order:
                    self.review_order.remove(event.job_id)
                self.review_order.append(event.job_id)
        elif isinstance(event, ev.LimitWait):
            self.waits[event.agent] = event.until
            if event.kind.startswith("budget:"):
                self.held[event.agent] = event.reason
            else:
                self.held.pop(event.agent, None)
        elif isinstance(event, ev.Window):
            key = f"{event.agent} {event.window}"
            self.first.setdefault(key, event.used)
            self.last[key] = event.used
        elif isinstance(event, ev.Untouchable):
            self.untouchable += 1
        elif isinstance(event, ev.DiskFull):
            self.disk_full = True
        elif isinstance(event, ev.Uncontained):
            self.uncontained = True
        elif isinstance(event, ev.JobGone):
            self.forget(event.job_id)

    def forget(self, job_id: int) -> None:
        """A Job the person dropped or accepted: its state is no news (its Runs
        and cost still happened)."""
        self.jobs.pop(job_id, None)
        if job_id in self.review_order:
            self.review_order.remove(job_id)

    @property
    def happened(self) -> bool:
        return bool(
            self.runs or self.waits or self.untouchable or self.disk_full or self.uncontained
        )

    def newest_review(self) -> int | None:
        """The Job whose review page the briefing's Review opens: the newest still in review."""
        for job_id in reversed(self.review_order):
            if self.jobs.get(job_id, ("",))[0] == "review":
                return job_id
        return None


def _why(text: str | None) -> str:
    line = textsafe.line(" ".join((text or "").split()))
    return line if len(line) <= REASON_MAX else line[: REASON_MAX - 1] + "…"


def parts(spell: Spell, hhmm: Callable[[float], str] = local_hhmm) -> list[str]:
    """The spell's facts, each a short phrase, in the order the briefing says them."""
    out = []
    if spell.runs:
        out.append(f"{spell.runs} Run{'s' if spell.runs != 1 else ''}")
    for job_id, (state, why) in sorted(spell.jobs.items()):
        if state == "review":
            out.append(f"job {job_id} ready for review")
        elif state in ("blocked", "exhausted"):
            word = "blocked" if state == "blocked" else "out of attempts"
            out.append(f"job {job_id} {word}" + (f" ({_why(why)})" if why else ""))
    if spell.cost:
        out.append(money.said_total(spell.cost, spell.unbilled))
    out += [textsafe.line(w) for w in night_words(spell.first, spell.last)]
    for agent, until in sorted(spell.waits.items(), key=lambda kv: kv[1]):
        held = spell.held.get(agent)
        out.append(
            textsafe.line(held)[:160]
            if held
            else f"{textsafe.line(agent)} waits until {hhmm(until)}"
        )
    if spell.untouchable:
        out.append(
            f"{spell.untouchable} process{'es' if spell.untouchable != 1 else ''} Owl may not stop"
        )
    if spell.disk_full:
        out.append("the disk was full")
    if spell.uncontained:
        out.append("Runs could not be contained, so Jobs waited (owl status says why)")
    return out


def spent(spell: Spell) -> str:
    """'3 Jobs ran · $1.84 · claude five-hour 40% → 78%, seven-day 31% → 44%', or ''."""
    jobs = len(spell.jobs)
    out = [f"{jobs} Job{'s' if jobs != 1 else ''} ran"] if jobs else []
    if spell.cost:
        out.append(money.said_total(spell.cost, spell.unbilled))
    out += [textsafe.line(w) for w in night_words(spell.first, spell.last)]
    return " · ".join(out)


def summary(spell: Spell, now: float, hhmm: Callable[[float], str] = local_hhmm) -> str:
    """'While you were away (2h 10m): …', or '' when nothing happened."""
    if not spell.happened:
        return ""
    head = f"While you were away ({duration(max(0.0, now - spell.since), coarse=True)})"
    return f"{head}: " + " · ".join(parts(spell, hhmm))


def view(
    spell: Spell, now: float, *, ended: float | None, hhmm: Callable[[float], str] = local_hhmm
) -> dict[str, Any]:
    """The briefing as `owl status --json` gives it (`notify.briefing`)."""
    end = ended if ended is not None else now
    return {
        "text": summary(spell, end, hhmm),
        "away_since": round(spell.since, 3),
        "back_at": None if ended is None else round(ended, 3),
        "away_s": round(max(0.0, end - spell.since), 1),
        "happened": spell.happened,
        "runs": spell.runs,
        "cost_usd": round(spell.cost, 4),
        "api_equivalent_usd": round(spell.unbilled, 4),
        "cost_kind": money.total_kind(spell.cost, spell.billed, spell.unbilled),
        "billed": money.total_billed(spell.cost, spell.billed, spell.unbilled),
        "spent": spent(spell),
        "windows": {
            k: [round(spell.first.get(k, v), 4), round(v, 4)] for k, v in spell.last.items()
        },
        "jobs": [{"id": j, "state": s, "reason": r} for j, (s, r) in sorted(spell.jobs.items())],
        "waits": [{"agent": a, "until_epoch": round(u, 3)} for a, u in spell.waits.items()],
        "review": spell.newest_review(),
    }
