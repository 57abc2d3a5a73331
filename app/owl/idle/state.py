"""The idle policy as one pure function: input + power -> "may Owl work now?"

`read_machine` also says when its answer may change without an input event
(`recheck_in`), so the engine can sleep exactly that long instead of polling:
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


def read_machine(monitor: _Monitor, power: _Power, *, after: float, require_ac: bool,
                 now: float) -> MachineState:
    """Apply the idle policy at monotonic time `now`.

    A machine whose input cannot be read is not idle. "in use" is reported
    before power reasons: the person being here is the stronger fact.
    """
    last = monitor.last_input()
    on_ac = power.on_ac()
    waits: list[float] = []
    if require_ac:
        waits.append(POWER_POLL)

    if last is None:
        waits.append(RETRY)
        problem = monitor.problem or "no idle source answers"
        return MachineState(False, None, on_ac, f"input cannot be read: {problem}", min(waits))

    idle_for = max(0.0, now - last)
    reason: str | None = None
    if in_use(idle_for, after=after):
        reason = "in use"
        waits.append(after - idle_for)
    elif not power_ok(on_ac, require_ac=require_ac):
        reason = "on battery" if on_ac is False else "power unknown"
    elif not monitor.hooks_live:
        # Idle, and a return would not arrive as an event: ask the reader soon.
        waits.append(INPUT_POLL)
    return MachineState(reason is None, idle_for, on_ac, reason, min(waits) if waits else None)
