"""Shifts as the engine holds them: loaded at start, ended when over, shown in status.

Apart from the engine's loop because a Shift's rules are owl.rules.shifts'; what is
left here is telling the core and the store. Runs on the engine thread; takes
the engine as `eng`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from owl.engine.state import State

from owl.engine import budgeting
from owl.rules import shifts
from owl.rules.lifecycle import Phase

log = logging.getLogger("owl.engine")


def load_shift(eng: State) -> None:
    sh = shifts.Shift.from_dict(eng.store.setting("shift"))
    if sh is not None and not sh.plausible(time.time()):
        log.warning(
            "the stored Shift (ending %s) is beyond any Shift's bounds; dropped", sh.ends_at
        )
        sh = None
        eng.store.set_setting("shift", None)
    if sh is not None and sh.over(time.time(), False):
        log.info("the stored Shift ended while the daemon was down")
        sh = None
        eng.store.set_setting("shift", None)
    set_shift(eng, sh)


def set_shift(eng: State, sh: shifts.Shift | None) -> None:
    now = eng.clock()
    eng.shift = sh
    if sh is not None:
        eng.do(eng.core.shift_on(now, require_power=sh.require_power))
    else:
        eng.do(eng.core.shift_off(now))
    budgeting.settle_all(eng)  # a Shift that spends lifts the headroom's holds


def check_shift(eng: State) -> None:
    if eng.shift is None:
        eng.shift_runs &= set(eng.live)
        return
    eng.shift_runs |= set(eng.live)
    # until the queue is empty: until no Job waits and none of its Runs works
    # (its end would freeze them if the person is here)
    why = eng.shift.over(time.time(), queue_empty=not eng.has_pending and not eng.shift_runs)
    if why is not None:
        log.info("the Shift ended: %s", why)
        eng.store.set_setting("shift", None)
        set_shift(eng, None)
        eng.shift_runs &= set(eng.live)


def ended(eng: State) -> dict[str, Any]:
    """What became of a Shift's live Runs as it ended: frozen (the person is
    here: the machine is theirs again) or carrying on (nobody is)."""
    mine = [eng.core.runs[i] for i in sorted(eng.shift_runs & set(eng.live)) if i in eng.core.runs]
    frozen = sum(1 for r in mine if r.phase is Phase.FROZEN)
    going = len(mine) - frozen
    said = []
    if frozen:
        said.append(
            f"{frozen} Run{'s' if frozen != 1 else ''} frozen, as you are here "
            "(ended when the grace window passes, unless you leave)"
        )
    if going:
        said.append(f"{going} Run{'s' if going != 1 else ''} carrying on while nobody is here")
    return {
        "on": False,
        "ended": True,
        "frozen": frozen,
        "running": going,
        "message": "Shift ended" + ("; " + "; ".join(said) if said else ""),
    }
