"""The Run lifecycle: every state and transition of a Run, and nothing else.

Theory of operation
-------------------

A Run is one attempt at a Job: one agent process tree. This module decides
what happens to live Runs when something happens to the machine or the person
says something; it does no I/O, reads no clock and sends no signal. The engine
feeds it events and carries out the actions it returns, in order.

Events in (methods of `Core`, each taking `now`, a monotonic time in seconds):

    started(run, exempt, checks)  the engine started an agent for a Run; `checks`
                             is (name, timeout) of each check that gates review
    input()                  the person is at the machine (first input event)
    idle()                   the idle policy holds again (a full idle.after of quiet)
    power(ok)                on AC, or on battery where that matters
    tick()                   time passed; deadlines are checked
    slept(seconds)           the machine was suspended that long (`now` did not
                             move meanwhile): it counts for the grace window,
                             not for runs.timeout or runs.stall
    output(run)              the Run wrote something (for the stall rule)
    exited(run, code)        the agent (leader), or the check now running, exited
    gone(run)                no process of the Run is left
    pause() / resume()       the person's hold
    stop(force)              the person ends the live Runs
    end(run, reason)         one Run ends now (its Job was dropped)
    shift_on(require_power) / shift_off()   a Shift began or ended
    shutdown()               the daemon is stopping
    over(run, reason)        the Run passed a cap (runs.memory, runs.processes):
                             frozen at once, then ended as a window's end ends one
    floor(run, reason)       the disk fell under runs.disk_floor: frozen at once, held
                             until room returns (`room`) or the grace window ends it
    room(run)                the disk has room again: a Run the floor held goes on

One question, which changes nothing: `freezes_on_input()`, the Runs an input
would freeze now, so that the thread hearing input can stop them before the
engine's thread takes the event (the engine then decides as ever, and undoes
a stop it did not decide).

Actions out: `Freeze`, `Thaw`, `Term` (SIGTERM then SIGCONT to every process),
`Kill` (SIGKILL to every process), `StartCheck` (start check i of the Run in a
process tree of its own) and `Finish` (the Run is over: record it).

A live Run is in one of three phases:

    running --(machine in use / pause / stop)--> frozen
    frozen  --(machine idle again, not held by the person)--> running
    frozen  --(grace window passes)--> ending            [Term]
    running --(timeout / stall / stop --force)--> ending [Term]
    running --(over a cap)--> frozen --> ending           [Freeze, Term]
    running --(disk under the floor)--> frozen            [Freeze] (by "disk")
    frozen by disk --(room again, machine idle)--> running [Thaw]
    running --(agent exits)--> ending                    [Term what is left]
    ending  --(5 s pass, something left)--> ending       [Kill]
    ending  --(nothing left)--> (finished)               [Finish]

Verification. A Run whose agent exited 0 and that has checks is not finished
when the agent's tree is gone: it goes on as check 0, then 1, ... each in its
own process tree (`StartCheck`), and is `verifying` while one runs. A check is
frozen, thawed and ended exactly like the agent (input freezes it; the grace
window interrupts the Run, no attempt spent); its own timeout, not
runs.timeout or runs.stall, bounds it. A check that exits non-zero, or
outlives its timeout, fails the Run naming the check; the last check passing
finishes the Run succeeded. A check is never started while the machine or
the person would freeze it at once: the Run waits frozen, and thawing it
starts the check.

    ending(agent or check passed) --(nothing left, check i next)--> verifying [StartCheck i]
    verifying --(check exits 0)--> ending --(nothing left)--> next check or [Finish succeeded]
    verifying --(check exits non-zero / timeout)--> ending --> [Finish failed]

Who may freeze whom is one rule, `_machine_blocks`, re-evaluated after every
event (`_settle`): a Run the machine froze thaws as soon as that rule stops
holding; a Run the person froze (pause, stop) is never thawed by the machine.
A Run started by `owl start` (exempt) and every Run during a Shift are not
frozen by input; a Shift that asks for power still freezes on battery. When a
Shift ends, the machine is the person's again at once: the Runs it had fall
under the machine's rule, frozen now if the person is there (their grace
window from that moment), carrying on if not.

The 5 s between Term and Kill is not configurable (ADR-0034): it is the
guarantee behind the grace window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from owl.rules import timefmt

KILL_DELAY = 5.0  # TERM+CONT, then KILL this long after: the guarantee behind the window
GRACE_DEFAULT = 900.0  # interruption.grace_window when the config says nothing (15 min)
STALL_DEFAULT = 900.0  # runs.stall when the config says nothing
TIMEOUT_DEFAULT = 4 * 3600.0  # runs.timeout when the config says nothing


def shown_outcome(outcome: str | None, ended_by: str | None) -> str:
    """The one word a person sees for how a Run ended: its outcome, or "killed"
    for a Run interrupted by SIGKILL (a timed-out Run killed is still "failed")."""
    if outcome == "interrupted" and ended_by == "sigkill":
        return "killed"
    return outcome or "ended"


def shown_run_outcome(run: Mapping[str, Any]) -> str:
    """`shown_outcome` of a Run as the store gives it (its row): a live Run,
    which has no outcome yet, is shown by its state ("running", "frozen").
    The review page and `owl jobs show` both read a Run's word here."""
    outcome = run.get("outcome") or run.get("state") or "?"
    return shown_outcome(str(outcome), run.get("ended_by"))


class Phase(str, Enum):
    RUNNING = "running"
    FROZEN = "frozen"
    ENDING = "ending"


class Outcome(str, Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class EndedBy(str, Enum):
    EXIT = "exit"
    SIGTERM = "sigterm"
    SIGKILL = "sigkill"


MACHINE = "machine"
USER = "user"
CAP = "cap"  # a cap of the Run's own (owl.rules.runcaps) froze it
DISK = "disk"  # the disk floor holds it: thawed when room returns

GRACE_PASSED = "the grace window passed while the machine was in use"
PAUSE_GRACE_PASSED = "paused for longer than the grace window"
STOPPED = "stopped by the user"
SHUTDOWN = "the daemon stopped"


# ------------------------------------------------------------------ actions


@dataclass(frozen=True)
class Freeze:
    run: int


@dataclass(frozen=True)
class Thaw:
    run: int


@dataclass(frozen=True)
class Term:
    run: int


@dataclass(frozen=True)
class Kill:
    run: int


@dataclass(frozen=True)
class StartCheck:
    run: int
    index: int


@dataclass(frozen=True)
class Finish:
    run: int
    outcome: Outcome
    ended_by: EndedBy
    reason: str | None
    exit_code: int | None


Action = Freeze | Thaw | Term | Kill | StartCheck | Finish


class Refusal(Exception):
    """A verb with nothing to act on; str() says why in one line."""


# -------------------------------------------------------------------- state


@dataclass
class Timing:
    grace: float = GRACE_DEFAULT
    timeout: float = TIMEOUT_DEFAULT
    stall: float = STALL_DEFAULT


@dataclass
class Run:
    id: int
    started_at: float
    exempt: bool = False
    phase: Phase = Phase.RUNNING
    frozen_by: str | None = None
    frozen_at: float | None = None
    deadline: float | None = None  # when a frozen Run's grace window ends
    expiry_reason: str = GRACE_PASSED
    frozen_total: float = 0.0  # time spent frozen, not counted against timeout
    last_output: float = 0.0
    # set once the Run is ending
    outcome: Outcome | None = None
    ended_by: EndedBy | None = None
    reason: str | None = None
    exit_code: int | None = None
    exited: bool = False
    kill_at: float | None = None
    # verification: (name, timeout) of every check; which one runs; which is next
    checks: tuple[tuple[str, float], ...] = ()
    check: int | None = None  # index of the check this Run is on, None: the agent
    check_live: bool = False  # its process was started (not waiting frozen)
    check_began: float = 0.0
    check_frozen_before: float = 0.0  # frozen_total when the check began
    next_check: int | None = None  # start this check once the tree is gone
    hold: str | None = None  # `owl stop` while between steps: freeze the next one

    @property
    def state(self) -> str:
        """What `owl status` calls it: a Run working on a check is `verifying`."""
        if self.phase is Phase.RUNNING and self.check is not None:
            return "verifying"
        return self.phase.value

    def check_time(self, now: float) -> float:
        """Time the current check has worked, frozen time left out."""
        frozen = self.frozen_total - self.check_frozen_before
        if self.phase is Phase.FROZEN and self.frozen_at is not None:
            frozen += now - self.frozen_at
        return now - self.check_began - frozen

    def active_time(self, now: float) -> float:
        frozen = self.frozen_total
        if self.phase is Phase.FROZEN and self.frozen_at is not None:
            frozen += now - self.frozen_at
        return now - self.started_at - frozen

    def grace_left(self, now: float) -> float | None:
        if self.phase is Phase.FROZEN and self.deadline is not None:
            return max(0.0, self.deadline - now)
        return None


@dataclass
class Shift:
    require_power: bool = False


@dataclass
class Core:
    """Every live Run and the facts that decide their fate."""

    timing: Timing = field(default_factory=Timing)
    paused: bool = False
    in_use: bool = True  # unknown at start counts as in use: nothing starts unasked
    on_battery: bool = False  # unplugged where the policy requires AC
    shift: Shift | None = None
    runs: dict[int, Run] = field(default_factory=dict)

    # ------------------------------------------------------------ queries

    def may_start(self) -> tuple[bool, str | None]:
        """Whether the machine lets a new Run start on its own, and if not why."""
        if self.paused:
            return False, "paused"
        if self.shift is not None:
            if self.shift.require_power and self.on_battery:
                return False, "on battery"
            return True, None
        if self.on_battery:
            return False, "on battery"
        if self.in_use:
            return False, "the machine is in use"
        return True, None

    def next_deadline(self) -> float | None:
        """The earliest moment a tick could change something."""
        moments: list[float] = []
        for r in self.runs.values():
            if r.phase is Phase.FROZEN and r.deadline is not None:
                moments.append(r.deadline)
            elif r.phase is Phase.RUNNING and r.check is not None:
                moments.append(now_free_deadline(r))
            elif r.phase is Phase.RUNNING:
                moments.append(r.started_at + r.frozen_total + self.timing.timeout)
                moments.append(r.last_output + self.timing.stall)
            elif r.phase is Phase.ENDING and r.kill_at is not None:
                moments.append(r.kill_at)
        return min(moments) if moments else None

    # ------------------------------------------------------------- events

    def started(
        self,
        run: int,
        now: float,
        exempt: bool = False,
        checks: tuple[tuple[str, float], ...] | list[tuple[str, float]] = (),
    ) -> list[Action]:
        self.runs[run] = Run(
            id=run,
            started_at=now,
            exempt=exempt,
            last_output=now,
            checks=tuple((str(n), float(t)) for n, t in checks),
        )
        return self._settle(now)

    def input(self, now: float) -> list[Action]:
        self.in_use = True
        return self._settle(now)

    def freezes_on_input(self) -> list[int]:
        """The Runs an input would freeze now, deciding nothing: what the
        thread that hears input may stop at once, before `input` decides."""
        was, self.in_use = self.in_use, True
        try:
            return [
                r.id
                for r in self.runs.values()
                if r.phase is Phase.RUNNING and self._machine_blocks(r)
            ]
        finally:
            self.in_use = was

    def idle(self, now: float) -> list[Action]:
        self.in_use = False
        return self._settle(now)

    def power(self, now: float, ok: bool) -> list[Action]:
        self.on_battery = not ok
        return self._settle(now)

    def output(self, run: int, now: float) -> list[Action]:
        r = self.runs.get(run)
        if r is not None:
            r.last_output = now
        return []

    def tick(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for r in list(self.runs.values()):
            if r.phase is Phase.FROZEN and r.deadline is not None and now >= r.deadline:
                actions += self._end(r, now, Outcome.INTERRUPTED, r.expiry_reason)
            elif r.phase is Phase.RUNNING and r.check is not None:
                name, limit = r.checks[r.check]
                if r.check_time(now) >= limit:
                    actions += self._end(
                        r,
                        now,
                        Outcome.FAILED,
                        f"check {name} ran longer than its timeout ({timefmt.spell(limit)})",
                    )
            elif r.phase is Phase.RUNNING and r.active_time(now) >= self.timing.timeout:
                actions += self._end(
                    r,
                    now,
                    Outcome.FAILED,
                    f"ran longer than runs.timeout ({timefmt.spell(self.timing.timeout)})",
                )
            elif r.phase is Phase.RUNNING and now - r.last_output >= self.timing.stall:
                actions += self._end(
                    r,
                    now,
                    Outcome.FAILED,
                    f"no output for runs.stall ({timefmt.spell(self.timing.stall)})",
                )
            elif r.phase is Phase.ENDING and r.kill_at is not None and now >= r.kill_at:
                if not r.exited:
                    r.ended_by = EndedBy.SIGKILL
                r.kill_at = now + KILL_DELAY  # ask again if something is wedged
                actions.append(Kill(r.id))
        return actions

    def slept(self, now: float, seconds: float) -> list[Action]:
        """The machine slept `seconds` that `now` did not count.

        The grace window is the person's time, so a frozen Run's window
        shrinks by the sleep; one whose window passed while asleep is ended
        here and now, before any other event of the wake (an idle reading
        must never thaw it first). Working time (timeout, stall, a check's
        timeout) is untouched: nothing worked while the machine slept."""
        if seconds <= 0:
            return []
        actions: list[Action] = []
        for r in list(self.runs.values()):
            if r.phase is Phase.FROZEN and r.deadline is not None:
                r.deadline -= seconds
                if now >= r.deadline:
                    actions += self._end(r, now, Outcome.INTERRUPTED, r.expiry_reason)
        return actions

    def exited(self, run: int, now: float, code: int, checks: bool = True) -> list[Action]:
        """The agent (or the check running) exited with `code`. `checks=False`:
        the agent's work is not done though it exited 0 (it stopped at its
        usage limit's checkpoint), so no check starts."""
        r = self.runs.get(run)
        if r is None:
            return []
        if r.check is None:
            r.exit_code = code  # the Run's exit code is its agent's
        r.exited = True
        if r.phase is Phase.ENDING:
            return []
        if r.phase is Phase.FROZEN and r.deadline is not None and now >= r.deadline:
            # Its window had passed (something ended it in our place while we
            # could not act): the window's outcome, not the agent's failure.
            return self._end(r, now, Outcome.INTERRUPTED, r.expiry_reason)
        if r.phase is Phase.FROZEN:
            self._unfreeze(r, now)
        if r.check is not None:
            name = r.checks[r.check][0]
            if code == 0:
                outcome, reason = Outcome.SUCCEEDED, None
                nxt = r.check + 1
                r.next_check = nxt if nxt < len(r.checks) else None
            else:
                outcome, reason = Outcome.FAILED, check_failed(name, code)
        elif code == 0:
            outcome, reason = Outcome.SUCCEEDED, None
            r.next_check = 0 if r.checks and checks else None
        else:
            outcome, reason = Outcome.FAILED, f"the agent exited with code {code}"
        r.phase = Phase.ENDING
        r.outcome, r.reason, r.ended_by = outcome, reason, EndedBy.EXIT
        r.kill_at = now + KILL_DELAY
        return [Term(r.id)]  # whatever the agent left behind goes the same way

    def gone(self, run: int, now: float) -> list[Action]:
        r = self.runs.get(run)
        if r is None:
            return []
        if r.check is not None and not r.check_live and r.phase is not Phase.ENDING:
            return []  # its check has not begun: nothing there to be gone
        if r.phase is not Phase.ENDING:
            # The tree vanished before the engine saw the agent (or check) exit.
            known = r.exit_code if r.check is None and r.exit_code is not None else -1
            self.exited(run, now, known)
            if r.check is not None and r.outcome is Outcome.FAILED:
                r.reason = f"check {r.checks[r.check][0]} ended without an exit status"
        if r.next_check is not None and r.outcome is Outcome.SUCCEEDED:
            return self._begin_check(r, now, r.next_check)
        del self.runs[run]
        assert r.outcome is not None and r.ended_by is not None
        return [Finish(r.id, r.outcome, r.ended_by, r.reason, r.exit_code)]

    def pause(self, now: float) -> list[Action]:
        if self.paused:
            raise Refusal("already paused (owl resume lets work go on)")
        self.paused = True
        actions: list[Action] = []
        for r in self.runs.values():
            if r.phase is Phase.RUNNING:
                actions += self._freeze(r, now, USER, PAUSE_GRACE_PASSED)
            elif r.phase is Phase.FROZEN:
                r.frozen_by = USER
                r.expiry_reason = PAUSE_GRACE_PASSED
        return actions

    def resume(self, now: float) -> list[Action]:
        held = [r for r in self.runs.values() if r.frozen_by == USER]
        if not self.paused and not held and not any(r.hold for r in self.runs.values()):
            raise Refusal("not paused, and no Run is held")
        self.paused = False
        for r in held:
            r.frozen_by = MACHINE  # the machine's rule decides from here
            r.expiry_reason = GRACE_PASSED
        for r in self.runs.values():
            r.hold = None
        return self._settle(now)

    def stop(self, now: float, force: bool = False) -> list[Action]:
        between = [r for r in self.runs.values() if _between_steps(r)]
        live = [r for r in self.runs.values() if r.phase is not Phase.ENDING]
        if not live and not between:
            raise Refusal("no Run is live")
        actions: list[Action] = []
        for r in between:
            if force:
                self._cancel_next(r, STOPPED)
            else:
                r.hold = STOPPED  # its next check waits frozen, as if stopped running
        for r in live:
            if force:
                actions += self._end(r, now, Outcome.INTERRUPTED, STOPPED)
            elif r.phase is Phase.RUNNING:
                actions += self._freeze(r, now, USER, STOPPED)
            else:
                r.frozen_by = USER
                r.expiry_reason = STOPPED
                r.deadline = min(r.deadline or now + self.timing.grace, now + self.timing.grace)
        return actions

    def end(self, run: int, now: float, reason: str) -> list[Action]:
        """End one Run now (its Job was dropped): interrupted, through Term and Kill."""
        r = self.runs.get(run)
        if r is None:
            return []
        if r.phase is Phase.ENDING:
            if _between_steps(r):
                self._cancel_next(r, reason)
            return []
        return self._end(r, now, Outcome.INTERRUPTED, reason)

    def over(self, run: int, now: float, reason: str) -> list[Action]:
        """The Run passed a cap: it stops growing at once (Freeze) and is ended
        as the grace window's end ends one (Term, Kill 5 s later), interrupted
        with `reason`. Not held frozen for a window: a frozen Run keeps every
        byte it holds, which is what the person needs back."""
        r = self.runs.get(run)
        if r is None or r.phase is Phase.ENDING:
            return []
        actions = [] if r.phase is Phase.FROZEN else self._freeze(r, now, CAP, reason)
        return actions + self._end(r, now, Outcome.INTERRUPTED, reason)

    def floor(self, run: int, now: float, reason: str) -> list[Action]:
        """The disk under the floor: the Run is frozen at once (it stops
        writing) and held, by "disk", until `room` or its window's end, which
        ends it with `reason`. A Run the person holds stays theirs."""
        r = self.runs.get(run)
        if r is None or r.phase is Phase.ENDING or r.frozen_by in (USER, DISK):
            return []
        if r.phase is Phase.FROZEN:  # the machine froze it: its window runs on
            r.frozen_by, r.expiry_reason = DISK, reason
            return []
        return self._freeze(r, now, DISK, reason)

    def room(self, run: int, now: float) -> list[Action]:
        """The disk has room again: a Run the floor held goes back to the
        machine's rule (thawed if nothing else holds it; its window runs on
        if the machine is in use)."""
        r = self.runs.get(run)
        if r is None or r.frozen_by != DISK:
            return []
        r.frozen_by, r.expiry_reason = MACHINE, GRACE_PASSED
        return self._settle(now)

    def shift_on(self, now: float, require_power: bool = False) -> list[Action]:
        self.shift = Shift(require_power=require_power)
        return self._settle(now)

    def shift_off(self, now: float) -> list[Action]:
        if self.shift is None:
            return []
        self.shift = None  # its Runs are the machine's now: frozen if the person is here
        return self._settle(now)

    def shutdown(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for r in list(self.runs.values()):
            if r.phase is not Phase.ENDING:
                actions += self._end(r, now, Outcome.INTERRUPTED, SHUTDOWN)
            elif _between_steps(r):
                self._cancel_next(r, SHUTDOWN)
            if r.kill_at is not None and r.phase is Phase.ENDING:
                r.kill_at = min(r.kill_at, now + KILL_DELAY)
        return actions

    # ------------------------------------------------------------ helpers

    def _machine_blocks(self, r: Run) -> bool:
        """Whether the machine's state alone keeps this Run frozen."""
        if r.exempt:
            return False
        if self.shift is not None:
            return self.shift.require_power and self.on_battery
        return self.in_use or self.on_battery

    def _settle(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for r in self.runs.values():
            blocked = self._machine_blocks(r)
            if r.phase is Phase.RUNNING and blocked:
                actions += self._freeze(r, now, MACHINE, GRACE_PASSED)
            elif r.phase is Phase.FROZEN and r.frozen_by == MACHINE and not blocked:
                actions += self._thaw(r, now)
        return actions

    def _freeze(self, r: Run, now: float, by: str, expiry_reason: str) -> list[Action]:
        r.phase = Phase.FROZEN
        r.frozen_by = by
        r.frozen_at = now
        r.deadline = now + self.timing.grace
        r.expiry_reason = expiry_reason
        return [Freeze(r.id)]

    def _unfreeze(self, r: Run, now: float) -> None:
        if r.frozen_at is not None:
            r.frozen_total += now - r.frozen_at
        r.phase = Phase.RUNNING
        r.frozen_by = r.frozen_at = r.deadline = None
        r.last_output = now  # silence while frozen is not a stall

    def _thaw(self, r: Run, now: float) -> list[Action]:
        self._unfreeze(r, now)
        if r.check is not None and not r.check_live:
            r.check_live = True  # it waited frozen before it began: begin it now
            return [StartCheck(r.id, r.check)]
        return [Thaw(r.id)]

    def _begin_check(self, r: Run, now: float, index: int) -> list[Action]:
        """Move a Run whose previous step passed (and whose tree is gone) to check `index`."""
        r.check, r.next_check = index, None
        r.phase = Phase.RUNNING
        r.outcome = r.reason = r.ended_by = r.kill_at = None
        r.exited = False
        r.check_began = now
        r.check_frozen_before = r.frozen_total
        r.last_output = now
        r.check_live = False
        if self.paused or r.hold is not None:
            why = r.hold or PAUSE_GRACE_PASSED
            r.hold = None
            return self._freeze(r, now, USER, why)
        if self._machine_blocks(r):
            return self._freeze(r, now, MACHINE, GRACE_PASSED)
        r.check_live = True
        return [StartCheck(r.id, index)]

    def _cancel_next(self, r: Run, reason: str) -> None:
        """A Run between steps is ended: no further check starts; it is interrupted."""
        r.next_check = None
        r.outcome, r.reason = Outcome.INTERRUPTED, reason

    def _end(self, r: Run, now: float, outcome: Outcome, reason: str) -> list[Action]:
        if r.phase is Phase.FROZEN:
            self._unfreeze(r, now)  # Term carries its own SIGCONT
        r.phase = Phase.ENDING
        r.outcome, r.reason = outcome, reason
        r.ended_by = EndedBy.SIGTERM
        r.kill_at = now + KILL_DELAY
        return [Term(r.id)]


def _between_steps(r: Run) -> bool:
    """Ending only to make room for its next check: still live in the person's eyes."""
    return r.phase is Phase.ENDING and r.next_check is not None and r.outcome is Outcome.SUCCEEDED


def now_free_deadline(r: Run) -> float:
    """When the check a Run is on reaches its timeout, if it is not frozen first."""
    assert r.check is not None
    return r.check_began + (r.frozen_total - r.check_frozen_before) + r.checks[r.check][1]


def check_failed(name: str, code: int) -> str:
    """The reason a Run failed on a check, in words."""
    if code == 127:
        return f"check {name} failed: command not found (exit 127)"
    if code < 0:
        return f"check {name} failed: killed by signal {-code}"
    return f"check {name} failed (exit {code})"
