"""The core's actions carried out: a Run frozen, thawed, asked to end, killed,
its check started, its end recorded.

Apart from the engine's loop because it is the one place where a decision of
the core meets the processes and the records, in the order the core gave:
the loop feeds the core events and hands what comes back here. Runs on the
engine thread; takes the engine as `eng`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.engine.state import State
    from owl.tree.cgroup import RunGroup
    from owl.tree.cgroup_caps import KernelCaps

from owl.engine import runchecks, runend, runwatch
from owl.tree.cgroup import give_back as cgroup_give_back
from owl.rules import lifecycle

log = logging.getLogger("owl.engine")


def do(eng: State, actions: list[lifecycle.Action]) -> None:
    """Carry out the core's actions, in order, on the Runs they name (a Run
    no longer live is passed over), then tell the views something changed."""
    for action in actions:
        lv = eng.live.get(action.run)
        if lv is None:
            continue
        if isinstance(action, lifecycle.Freeze):
            lv.freeze_now()
            r = eng.core.runs[action.run]
            eng.note(
                lv.run_id,
                state="frozen",
                frozen_by=r.frozen_by,
                grace_ends_at=eng.grace_ends_at(r),
            )
            heard = eng.input_heard
            t = lv.tree
            how = (
                heard.describe(t.stopped_first_at, t.signalled_at, time.monotonic())
                if heard
                else ""
            )
            # (a Run over a cap is ending by now: the core froze it on the way)
            by = r.frozen_by or (lifecycle.CAP if r.phase is lifecycle.Phase.ENDING else None)
            log.info("run %s frozen by %s%s", lv.run_id, by, how)
            runend.note_not_stopped(eng, lv)
            runwatch.record_pids(eng, lv)
            give_back(lv.run_id, lv.cgroup, lv.caps)
        elif isinstance(action, lifecycle.Thaw):
            lv.thaw_now()
            eng.note(lv.run_id, state=eng.core.runs[action.run].state, frozen_by=None)
            log.info("run %s thawed", lv.run_id)
        elif isinstance(action, lifecycle.StartCheck):
            runchecks.start_check(eng, lv, action.index)
        elif isinstance(action, lifecycle.Term):
            if lv.waiting:
                lv.exited = True  # its check never began: nothing is left to end
            lv.tree.term()
            lv.not_stopped = []
            eng.note(lv.run_id, state="ending", frozen_by=None)
            log.log(runend.term_level(eng, action.run), "run %s asked to stop", lv.run_id)
        elif isinstance(action, lifecycle.Kill):
            # One round of SIGKILLs, no waiting for the kernel to reap: the
            # watch sees the tree go, and the core asks again if it is wedged.
            lv.tree.kill(timeout=0)
            log.info("run %s killed", lv.run_id)
        elif isinstance(action, lifecycle.Finish):
            runend.finish_safely(eng, lv, action)
            if lv.cgroup is not None:
                lv.cgroup.remove()
            if lv.caps is not None:
                lv.caps.remove()
            then = eng.after_run.pop(action.run, None)
            if then is not None:
                then()
        if not isinstance(action, lifecycle.Finish):
            runend.note_untouchable(eng, lv)
    eng.acted += len(actions)
    if actions and eng.on_change is not None:
        eng.on_change()


def give_back(run_id: int, group: RunGroup | None, caps: KernelCaps | None = None) -> None:
    """A frozen Run's memory reclaimed by the kernel (to swap), so the person's
    programs are not the ones paged out when they come back: on a thread of its
    own, since the kernel writes the pages out in the caller's time. The Run's
    cgroup v2 where it has a memory controller, else the v1 memory cgroup its
    caps made (as root on a v1 machine)."""
    v1 = caps.memory_dir if caps is not None else None
    if group is None and v1 is None:
        return

    def reclaim() -> None:
        freed = group.reclaim() if group is not None else None
        if freed is None and v1 is not None:
            freed = cgroup_give_back(v1)
        if freed:
            log.info("run %s frozen: %.0f MB of its memory given back", run_id, freed / 2**20)

    threading.Thread(target=reclaim, name=f"owl-reclaim-{run_id}", daemon=True).start()
