"""The machine as the engine reads it: the idle policy applied, and when to look again.

Apart from the engine's loop so that the rule for "may Owl work now?" has one
home: `owl.idle.state` decides in-use and power (the same rule `read_machine`
applies); here that answer is told to the core, and the next moment it could
change without an event is worked out. Runs on the engine thread; takes the
engine as `eng`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.engine import Engine

from owl.errors import Refused
from owl.idle import state as idle_policy
from owl.lifecycle import Phase


def settle_machine(eng: Engine, now: float, force_input: bool = False) -> None:
    r = eng.machine.read()
    eng.reading = r
    cfg = eng.cfg
    # Power is read on every settle (a few sysfs reads); how often a settle
    # happens without an event is _machine_recheck's business.
    power_ok = idle_policy.power_ok(r.on_ac, require_ac=cfg.require_ac_power)
    if power_ok == eng.core.on_battery:
        eng.do(eng.core.power(now, power_ok))
    quiet = r.idle_for
    in_use = force_input or idle_policy.in_use(quiet, after=cfg.idle_after)
    if in_use and not eng.core.in_use:
        eng.do(eng.core.input(now))
    elif not in_use and eng.core.in_use:
        eng.do(eng.core.idle(now))
        eng.set_aside.clear()          # a new idle spell: stopped Jobs may run again
    eng._armed = not eng.core.in_use or not r.hooks_live


def machine_recheck(eng: Engine, now: float) -> float:
    r = eng.reading
    if eng.core.in_use and r.idle_for is not None:
        return now + max(0.05, eng.cfg.idle_after - r.idle_for)
    if not r.hooks_live and any(x.phase is Phase.RUNNING for x in eng.core.runs.values()):
        return now + 1.0          # no input events here: look for the person's return
    if eng.live or eng._pending_cache:
        return now + 5.0          # power changes have no event
    return now + 30.0


def machine_event(eng: Engine, event: str) -> None:
    """Drive a ManualMachine (tests, scripts); the engine re-reads it at once."""
    setter = getattr(eng.machine, "set", None)
    if setter is None:
        raise Refused("the machine is read from its own input here, not set by hand "
                      "(start the daemon with OWL_MACHINE=manual)")
    try:
        setter(event)
    except ValueError as e:
        raise Refused(str(e)) from None
    settle_machine(eng, eng.clock())
