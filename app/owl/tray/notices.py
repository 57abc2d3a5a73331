"""Which desktop notifications a new status document calls for.

Pure and stateful only in what it has already said, so the rules are tested
without a display:

- a Run frozen by the machine is announced once per *spell* at the machine
  (the spell ends when the machine is idle again), with the time it has left;
- a Run killed (ended by SIGKILL) is announced once;
- a Job reaching review is announced once;
- a Run with a process Owl may not signal (it became root) is announced once;
- a Run that changed things outside its branch (moved `main`, planted a
  hook, set a git config) is announced once, whenever the tray started.
- an agent's wait for a usage limit (or its service) is announced when it begins.
- the briefing after an away spell in which something happened is announced
  once, with a Review button for the newest Job in review.

What was already there when the tray started is not news and is not shown.
"""

from __future__ import annotations

from typing import Any

from owl import textsafe
from owl.rules.capwords import is_cap_stop
from owl.tray.wording import clock, short, until_words


class Notice(tuple):
    """(title, message), and the Job whose review page a Review button opens (or None)."""

    review: int | None

    def __new__(cls, title: str, message: str, review: int | None = None) -> "Notice":
        self = super().__new__(cls, (title, message))
        self.review = review
        return self


class Notices:
    def __init__(self) -> None:
        self._primed = False
        self._frozen_said: set[int] = set()
        self._killed_said: set[int] = set()
        self._capped_said: set[int] = set()
        self._review_said: set[int] = set()
        self._untouchable_said: set[int] = set()
        self._outside_said: set[int] = set()
        self._limits_said: set[tuple] = set()
        self._briefing_said: set[Any] = set()
        self._permission_said: str | None = None

    def update(self, status: dict[str, Any]) -> list[tuple[str, str]]:
        """(title, message) pairs to show for this status document."""
        out: list[tuple[str, str]] = []
        machine = status.get("machine") or {}
        if machine.get("idle"):
            self._frozen_said.clear()  # the person left: a new spell starts
        for run in status.get("runs") or []:
            if run.get("state") != "frozen" or run.get("frozen_by") == "user":
                continue
            rid = run.get("id")
            if rid in self._frozen_said:
                continue
            self._frozen_said.add(rid)
            left = run.get("grace_left_s")
            when = (
                f"It stops in {clock(left)} unless you step away."
                if left is not None
                else "It goes on when you step away."
            )
            if run.get("frozen_by") == "disk":  # the disk floor holds it, not your input
                when = (
                    f"{textsafe.line(run.get('stopped') or 'The disk is nearly full')}\n"
                    f"It goes on when there is room, or stops in {clock(left)}."
                )
            out.append(
                (f"Job {run.get('job_id')} frozen", f"{short(run.get('title'), 60)}\n{when}")
            )
        for entry in status.get("recent") or []:
            rid = entry.get("run_id")
            if entry.get("ended_by") != "sigkill" or rid in self._killed_said:
                continue
            self._killed_said.add(rid)
            reason = textsafe.line(
                entry.get("reason") or "it did not end within 5 s of being asked"
            )
            out.append(
                (f"Job {entry.get('job_id')} killed", f"{short(entry.get('title'), 60)}\n{reason}")
            )
        out += self._capped(status)
        out += self._untouchable(status)
        for job in status.get("review") or []:
            jid = job.get("id")
            if jid in self._review_said:
                continue
            self._review_said.add(jid)
            out.append(
                Notice(
                    f"Job {jid} ready for review",
                    f"{short(job.get('title'), 60)}\nBranch {textsafe.line(job.get('branch'))}",
                    review=jid,
                )
            )
        for w in status.get("limits") or []:
            key = (w.get("agent"), w.get("until"))
            if key in self._limits_said:
                continue
            self._limits_said.add(key)
            out.append(
                (
                    f"Work waits until {until_words(w)}",
                    f"{textsafe.line(w.get('reason'))}\nIt carries on by itself then.",
                )
            )
        brief = (status.get("notify") or {}).get("briefing") or {}
        if brief.get("text") and brief.get("id") not in self._briefing_said:
            self._briefing_said.add(brief.get("id"))
            out.append(
                Notice("Welcome back", textsafe.line(brief["text"]), review=brief.get("review"))
            )
        if not self._primed:
            said = [n for n in out if " left a process" in n[0]]
            # Startup: remember what is there, announce none of it, except a
            # Run frozen right now (its countdown is running).
            self._primed = True
            out = [n for n in out if n[0].endswith(" frozen")] + said
        return out + self._permission(machine) + self._outside(status)

    def _permission(self, machine: dict[str, Any]) -> list[tuple[str, str]]:
        """A permission the input hooks lack (Input Monitoring): said once, at
        start too, and again only if it goes missing again after a grant."""
        missing = machine.get("missing")
        if not missing:
            self._permission_said = None
            return []
        if self._permission_said == missing:
            return []
        self._permission_said = missing
        return [(f"{missing} is not granted", textsafe.line(machine.get("permission") or missing))]

    def _capped(self, status: dict[str, Any]) -> list[tuple[str, str]]:
        """One notice per Run stopped at a cap of its own (runs.memory, runs.processes)."""
        out = []
        for run in status.get("runs") or []:
            rid, why = run.get("id"), run.get("stopped")
            if not why or run.get("frozen_by") == "disk" or rid in self._capped_said:
                continue  # the disk floor's hold is said as its freeze
            self._capped_said.add(rid)
            out.append(
                (
                    f"Job {run.get('job_id')} stopped at a cap",
                    f"{short(run.get('title'), 60)}\n{textsafe.line(why)}\n"
                    "It waits in the queue; no attempt is spent.",
                )
            )
        for entry in status.get("recent") or []:
            rid, why = entry.get("run_id"), entry.get("reason")
            if not is_cap_stop(why) or rid in self._capped_said:
                continue
            self._capped_said.add(rid)
            out.append(
                (
                    f"Job {entry.get('job_id')} stopped at a cap",
                    f"{short(entry.get('title'), 60)}\n{textsafe.line(why)}",
                )
            )
        return out

    def _untouchable(self, status: dict[str, Any]) -> list[tuple[str, str]]:
        """One notice per Run that has processes Owl may not signal."""
        out = []
        entries = [
            (r.get("id"), r.get("job_id"), r.get("untouchable")) for r in status.get("runs") or []
        ]
        entries += [
            (r.get("run_id"), r.get("job_id"), r.get("untouchable"))
            for r in status.get("recent") or []
        ]
        for rid, jid, procs in entries:
            if not procs or rid in self._untouchable_said:
                continue
            self._untouchable_said.add(rid)
            first = procs[0]
            more = f" and {len(procs) - 1} more" if len(procs) > 1 else ""
            out.append(
                (
                    f"Job {jid} left a process Owl may not stop",
                    f"pid {first.get('pid')} ({short(first.get('command'), 40)}){more}: "
                    f"{first.get('why')}",
                )
            )
        return out

    def _outside(self, status: dict[str, Any]) -> list[tuple[str, str]]:
        """A Run that reached past its branch: said even if it was there before
        the tray started, since nothing else tells the person."""
        out = []
        for entry in status.get("recent") or []:
            rid, lines = entry.get("run_id"), entry.get("outside") or []
            if not lines or rid in self._outside_said:
                continue
            self._outside_said.add(rid)
            more = f" (and {len(lines) - 2} more)" if len(lines) > 2 else ""
            out.append(
                (
                    f"Job {entry.get('job_id')} changed things outside its branch",
                    "the agent " + "; ".join(lines[:2]) + more,
                )
            )
        return out
