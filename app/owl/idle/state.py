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

#: Reader poll while idle and hooks are not live: a return is seen within this.
INPUT_POLL = 1.0
#: How often the charger is looked at while AC power is required.
POWER_POLL = 10.0
#: How often an unreadable machine is looked at again (an X server may come back).
RETRY = 5.0


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
    idle: bool                 # quiet >= after and (on AC or AC not required)
    idle_for: float | None     # seconds since last input, None if unreadable
    on_ac: bool | None
    reason: str | None         # why not idle, in words; None when idle
    recheck_in: float | None   # seconds until the answer may change without input


def in_use(idle_for: float | None, *, after: float) -> bool:
    """The person is here: input less than `after` seconds ago, or input that
    cannot be read (a machine nobody can vouch for is not idle)."""
    return idle_for is None or idle_for < after


def power_ok(on_ac: bool | None, *, require_ac: bool) -> bool:
    """Power lets Owl work: AC is not required, or the machine is known to be on AC."""
    return not require_ac or on_ac is True


@dataclass(frozen=True)
class Verdict:
    """The policy's answer for one reading, as the engine tells its core."""

    in_use: bool               # the person is here (or nobody can vouch they are not)
    power_ok: bool             # power lets Owl work
    reason: str | None         # why Owl may not work now, in words; None when it may
    recheck_in: float | None   # seconds until the answer may change without input


def judge(idle_for: float | None, on_ac: bool | None, *, after: float, require_ac: bool,
          hooks_live: bool, problem: str | None = None, watching: bool = True) -> Verdict:
    """The idle policy over one reading: `idle_for` seconds quiet (None: cannot be
    read) and `on_ac`. `watching` says whether anything runs that the person's
    return must stop: only then is input polled for where it cannot arrive as
    events (a poll every second costs a laptop's battery for nothing otherwise).
    """
    waits: list[float] = [POWER_POLL] if require_ac else []
    ok = power_ok(on_ac, require_ac=require_ac)
    if idle_for is None:
        waits.append(RETRY)
        return Verdict(True, ok, f"input cannot be read: {problem or 'no idle source answers'}",
                       min(waits))
    reason: str | None = None
    here = in_use(idle_for, after=after)
    if here:
        reason = "in use"
        waits.append(after - idle_for)
    elif not ok:
        reason = "on battery" if on_ac is False else "power unknown"
    elif not hooks_live and watching:
        # Idle, and a return would not arrive as an event: ask the reader soon.
        waits.append(INPUT_POLL)
    return Verdict(here, ok, reason, min(waits) if waits else None)


def read_machine(monitor: _Monitor, power: _Power, *, after: float, require_ac: bool,
                 now: float) -> MachineState:
    """Apply the idle policy (`judge`) at monotonic time `now`.

    A machine whose input cannot be read is not idle. "in use" is reported
    before power reasons: the person being here is the stronger fact.
    """
    last = monitor.last_input()
    on_ac = power.on_ac()
    idle_for = None if last is None else max(0.0, now - last)
    v = judge(idle_for, on_ac, after=after, require_ac=require_ac,
              hooks_live=monitor.hooks_live, problem=monitor.problem)
    return MachineState(v.reason is None, idle_for, on_ac, v.reason, v.recheck_in)
