"""The watch over live Runs: a sign of life in the log, a tree gone, new processes recorded.

Apart from the engine's loop because it is what runs on every pass while Runs
are live, and should stay cheap and easy to read: the sink counts the output,
the process tree says who is left, and only a change is written. Runs on the
engine thread; takes the engine as `eng`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.engine.state import State

from owl import tree
from owl.engine import budgeting, capwatch, runend, runstart
from owl.engine.live import Live


def watch(eng: State, now: float) -> None:
    capwatch.floor(eng, now)  # the disk under the floor holds the Runs there
    if not eng.live:
        return
    tree.reap_orphans(lambda pid: owned(eng, pid))
    for lv in list(eng.live.values()):
        watch_log(eng, lv, now)
        budgeting.watch(eng, lv)
        runstart.note_network(eng, lv)
        if lv.check_proc is not None:
            lv.check_proc.trim()
        if lv.exited and not lv.tree.alive():
            eng.do(eng.core.gone(lv.run_id, now))
            r = eng.core.runs.get(lv.run_id)
            if r is not None and r.check is not None and not r.check_live:
                lv.exited, lv.waiting = False, True  # frozen before its check began
            continue
        refreeze(eng, lv)
        record_pids(eng, lv)
        capwatch.watch(eng, lv, now)  # over runs.memory or runs.processes: stopped
        runend.note_untouchable(eng, lv)  # e.g. work handed to launchd, as soon as seen


def refreeze(eng: State, lv: Live) -> None:
    """A frozen Run whose freeze left some of it running is frozen again, on
    every pass, until all of it is stopped."""
    r = eng.core.runs.get(lv.run_id)
    if lv.not_stopped and r is not None and r.state == "frozen":
        lv.tree.freeze()
        runend.note_not_stopped(eng, lv)


def record_pids(eng: State, lv: Live) -> None:
    """Record the Run's processes as its tree knows them, where they changed:
    on every pass, and at once after a freeze, whose sweep may be the first
    to meet an agent frozen as soon as it started."""
    reaper = getattr(lv.popen, "reaper_pid", None)  # the Run's own, not the agent's
    pids = sorted(p for p, _ in lv.tree.identities() if p != reaper)
    lv.tree.prepare()  # the next freeze's handles, opened now rather than then
    if pids != lv.pids and eng.core.runs.get(lv.run_id) is not None:
        lv.pids = pids
        eng.note(lv.run_id, pids=lv.tree.identities())


def owned(eng: State, pid: int) -> bool:
    return any(lv.popen.pid == pid and lv.popen.returncode is None for lv in eng.live.values())


def watch_log(eng: State, lv: Live, now: float) -> None:
    # The sink keeps the log within LOG_CAP as it writes; here only a sign of life.
    seen = lv.sink.received
    if seen != lv.log_size:
        eng.core.output(lv.run_id, now)
        lv.log_size = seen
