"""The idle policy as one pure function: input + power -> "may Owl work now?"

`judge` is the policy over one reading, and the engine's; `read_machine` applies
it to an idle monitor and a power reader. Both say when the answer may change
without an input event (`recheck_in`), so the engine can sleep exactly that
long instead of polling:
the time left until `after` is reached; a short poll only while the machine is
idle and input cannot arrive as events; a power poll while AC is required
(unplugging raises no event here); a retry while input cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

#: Reader poll while idle and hooks are not live, or may miss input (macOS
#: taps under Secure Input): a return is seen within this.
INPUT_POLL = 1.0
#: How often the charger is looked at while AC power is required.
POWER_POLL = 10.0
#: ...on a machine with no battery (a desktop): only in case one appears.
FIXED_POWER_POLL = 60.0
#: How often an unreadable machine is looked at again (an X server may come back).
RETRY = 5.0
#: While the screen is locked, this much quiet is enough (when idle.after is longer).
LOCKED_AFTER = 10.0


class _Monitor(Protocol):
    def last_input(self) -> float | None: ...
    @property
    def hooks_live(self) -> bool: ...
    @property
    def problem(self) -> str | None: ...


class _Power(Protocol):
    def on_ac(self) -> bool | None: ...


@dataclass(frozen=True)
class MachineState:
    idle: bool  # quiet >= after and (on AC or AC not required)
    idle_for: float | None  # seconds since last input, None if unreadable
    on_ac: bool | None
    reason: str | None  # why not idle, in words; None when idle
    recheck_in: float | None  # seconds until the answer may change without input


def in_use(idle_for: float | None, *, after: float) -> bool:
    """The person is here: input less than `after` seconds ago, or input that
    cannot be read (a machine nobody can vouch for is not idle)."""
    return idle_for is None or idle_for < after


def quiet_enough(after: float, locked: bool | None) -> float:
    """How much quiet makes the machine idle: `idle.after`, or, while the screen
    is locked, no more than `LOCKED_AFTER`.

    A person who locks the screen has said they are leaving, so Runs start (or
    a frozen one thaws) within seconds rather than after the whole `idle.after`.
    Not at once: the key that locked it, or a hand on the mouse at the lock
    screen, is input, and input freezes a Run at once as always; a few quiet
    seconds after it keep a Run from being frozen and thawed by every touch.
    Input that cannot be read still counts as in use, locked or not.
    """
    return min(after, LOCKED_AFTER) if locked else after


def away(idle_for: float | None, *, after: float, locked: bool | None) -> bool:
    """The person is away, for what goes to their channels: no input for `after`
    seconds, or the screen locked, even if input came a moment ago (a locked
    screen is read by nobody). Unlocking is presence again."""
    return bool(locked) or not in_use(idle_for, after=after)


def power_ok(on_ac: bool | None, *, require_ac: bool) -> bool:
    """Power lets Owl work: AC is not required, or the machine is known to be on AC."""
    return not require_ac or on_ac is True


@dataclass(frozen=True)
class Verdict:
    """The policy's answer for one reading, as the engine tells its core."""

    in_use: bool  # the person is here (or nobody can vouch they are not)
    power_ok: bool  # power lets Owl work
    reason: str | None  # why Owl may not work now, in words; None when it may
    recheck_in: float | None  # seconds until the answer may change without input


def judge(
    idle_for: float | None,
    on_ac: bool | None,
    *,
    after: float,
    require_ac: bool,
    hooks_live: bool,
    problem: str | None = None,
    watching: bool = True,
    hooks_may_miss: bool = False,
    power_fixed: bool = False,
    locked: bool | None = None,
) -> Verdict:
    """The idle policy over one reading: `idle_for` seconds quiet (None: cannot be
    read) and `on_ac`. `watching` says whether anything runs that the person's
    return must stop: only then is input polled for where it cannot arrive as
    events (a poll every second costs a laptop's battery for nothing otherwise),
    or where the hooks may miss some of it (`hooks_may_miss`: a macOS event
    tap hears no keys under Secure Input, while the idle counter does).
    `power_fixed`: no battery was found, so the charger is looked at only
    now and then (a battery plugged in later), not every few seconds.
    `locked`: the screen is locked (`quiet_enough` says what that changes).
    """
    after = quiet_enough(after, locked)
    waits: list[float] = [FIXED_POWER_POLL if power_fixed else POWER_POLL] if require_ac else []
    ok = power_ok(on_ac, require_ac=require_ac)
    if idle_for is None:
        waits.append(RETRY)
        return Verdict(
            True, ok, f"input cannot be read: {problem or 'no idle source answers'}", min(waits)
        )
    reason: str | None = None
    here = in_use(idle_for, after=after)
    if here:
        reason = "in use"
        waits.append(after - idle_for)
    elif not ok:
        reason = "on battery" if on_ac is False else "power unknown"
    elif (not hooks_live or hooks_may_miss) and watching:
        # Idle, and a return might not arrive as an event: ask the reader soon.
        waits.append(INPUT_POLL)
    return Verdict(here, ok, reason, min(waits) if waits else None)


def read_machine(
    monitor: _Monitor, power: _Power, *, after: float, require_ac: bool, now: float
) -> MachineState:
    """Apply the idle policy (`judge`) at monotonic time `now`.

    A machine whose input cannot be read is not idle. "in use" is reported
    before power reasons: the person being here is the stronger fact.
    """
    last = monitor.last_input()
    on_ac = power.on_ac()
    idle_for = None if last is None else max(0.0, now - last)
    v = judge(
        idle_for,
        on_ac,
        after=after,
        require_ac=require_ac,
        hooks_live=monitor.hooks_live,
        problem=monitor.problem,
        hooks_may_miss=bool(getattr(monitor, "hooks_may_miss", False)),
        power_fixed=bool(getattr(power, "fixed", False)),
    )
    return MachineState(v.reason is None, idle_for, on_ac, v.reason, v.recheck_in)
