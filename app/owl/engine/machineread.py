"""The machine as the engine reads it: the idle policy applied, and when to look again.

The rule for "may Owl work now?" has one home, `owl.idle.state.judge` (the
one `read_machine` applies): it says in use or not, whether power allows,
and when its answer may change without an event. Here that answer is told
to the core, and the engine is told when to look again (`eng.recheck_at`).
Runs on the engine thread; takes the engine as `eng`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.engine.state import State

from owl.errors import Refused
from owl.idle import state as idle_policy
from owl.engine import telling
from owl.rules.lifecycle import Phase

log = logging.getLogger("owl.engine")

LONG = 60.0  # nothing the policy can foresee: the engine's own wakes suffice


def settle_machine(eng: State, now: float, force_input: bool = False) -> None:
    """Read the machine, apply the idle policy, and tell the core what changed."""
    r = eng.machine.read()
    eng.reading = r
    cfg = eng.cfg
    watching = any(x.phase is Phase.RUNNING for x in eng.core.runs.values())
    v = idle_policy.judge(
        r.idle_for,
        r.on_ac,
        after=cfg.idle_after,
        require_ac=cfg.require_ac_power,
        hooks_live=r.hooks_live,
        problem=r.problem,
        watching=watching,
        hooks_may_miss=r.hooks_may_miss,
        power_fixed=r.power_fixed,
        locked=r.locked,
    )
    eng.recheck_at = now + (max(0.05, v.recheck_in) if v.recheck_in is not None else LONG)
    if v.power_ok == eng.core.on_battery:
        eng.do(eng.core.power(now, v.power_ok))
    in_use = force_input or v.in_use
    if in_use and not eng.core.in_use:
        eng.do(eng.core.input(now))
    elif not in_use and eng.core.in_use:
        eng.do(eng.core.idle(now))
        eng.set_aside.clear()  # a new idle spell: stopped Jobs may run again
    eng.armed = not eng.core.in_use or not r.hooks_live
    telling.reading(eng, r.idle_for, r.locked, now)


def notice_sleep(eng: State) -> None:
    """Tell the core how long the machine slept, if it did: a frozen Run's
    grace window counts the sleep (see lifecycle.Core.slept)."""
    slept = eng.sleep_watch.slept()
    if not slept:
        return
    log.info("the machine slept for %.0f s", slept)
    eng.do(eng.core.slept(eng.clock(), slept))
    for r in eng.core.runs.values():
        if r.phase is Phase.FROZEN and r.id in eng.live:
            eng.note(r.id, grace_ends_at=eng.grace_ends_at(r))


def machine_event(eng: State, event: str) -> None:
    """Drive a ManualMachine (tests, scripts); the engine re-reads it at once."""
    setter = getattr(eng.machine, "set", None)
    if setter is None:
        raise Refused(
            "the machine is read from its own input here, not set by hand "
            "(start the daemon with OWL_MACHINE=manual)"
        )
    try:
        setter(event)
    except ValueError as e:
        raise Refused(str(e)) from None
    settle_machine(eng, eng.clock())
