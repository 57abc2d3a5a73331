"""A Run's checks: each started in a process tree of its own when the core says so, and recorded.

Apart from the engine's loop so that the order of things (a check's result is
written before the core hears it exited, an interrupted check is not its own
verdict) sits in one short place. Runs on the engine thread; takes the engine as `eng`.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.engine.state import State

from owl.engine import checks as checksmod
from owl.engine import containing
from owl.rules import jobrules, lifecycle
from owl.engine import runstart
from owl.rules.lifecycle import Phase
from owl.sandbox import raced
from owl.engine.live import Live

log = logging.getLogger("owl.engine")


def start_check(eng: State, lv: Live, index: int) -> None:
    """Start check `index` of a Run in a process tree of its own (the core said so)."""
    check = lv.checks[index]
    assert lv.worktree is not None
    env = checksmod.env_for(lv.env, check, index, lv.worktree, {})
    lv.waiting = False
    try:
        if lv.git_changed:
            names = ", ".join(str(e["name"]) for e in lv.git_changed)
            raise OSError(f"the worktree's git files were changed ({names})")
        cp = checksmod.CheckProcess(
            check,
            index,
            worktree=lv.worktree,
            env=env,
            log_file=checksmod.log_path(eng.paths.logs, lv.run_id, index),
            tag=("OWL_RUN_ID", str(lv.run_id)),
            nice=eng.cfg.nice,
            contain=containing.for_checks(
                eng.cfg, eng.paths, lv.worktree, Path(lv.project), lv.sandbox, lv.places
            ),
        )
    except OSError as e:
        result = checksmod.Result(
            index, check.name, check.run, "failed", 127, 0.0, f"the check could not be started: {e}"
        )
        record_check(eng, lv, result)
        lv.exited = True
        eng.do(eng.core.exited(lv.run_id, eng.clock(), 127))
        return
    lv.check_proc, lv.popen, lv.tree, lv.exited = cp, cp.popen, cp.tree, False
    eng.store.set_run(lv.run_id, state="verifying", frozen_by=None, pids=cp.tree.identities())
    threading.Thread(
        target=runstart.wait_proc,
        args=(eng, lv.run_id, cp.popen, cp.settle, lv),
        daemon=True,
        name=f"owl-check-{lv.run_id}-{index}",
    ).start()
    log.info(
        "run %s: check %s (%s) started (pid %s)", lv.run_id, index + 1, check.name, cp.popen.pid
    )


def check_exited(eng: State, lv: Live, code: int) -> bool:
    """Record the check that just exited, before the core hears of it; False
    (nothing recorded, the core not to hear of it) when its sandbox's set-up
    lost a race with the host and the same check has started again."""
    cp, now = lv.check_proc, eng.clock()
    assert cp is not None  # called for the check's own process only
    r = eng.core.runs.get(lv.run_id)
    if code != 0 and r is not None and r.phase is Phase.RUNNING and _start_again(eng, lv, cp, code):
        return False
    duration = r.check_time(now) if r is not None else None
    said = None
    if r is not None and r.phase is Phase.ENDING:
        # ended by the core (timeout, grace window, stop): not the check's own verdict
        outcome = "interrupted" if r.outcome is lifecycle.Outcome.INTERRUPTED else "failed"
    elif code != 0 and (words := cp.sandbox_failed(code)) is not None:
        # its sandbox failed at its own start: Owl's failure, as a Run's start
        # is (`runend._judge`): no verdict on the work, no attempt spent
        outcome, lv.setup_failed = "interrupted", words
        said = f"{jobrules.SANDBOX_FAILED}: {words}"
    else:
        outcome = "passed" if code == 0 else "failed"
    result = cp.finish(outcome, code, duration, said)
    lv.check_proc = None
    record_check(eng, lv, result)
    log.info("run %s: check %s %s (exit %s)", lv.run_id, result.name, outcome, code)
    return True


def _start_again(eng: State, lv: Live, cp: checksmod.CheckProcess, code: int) -> bool:
    """A check whose sandbox could not be set up because a host socket went
    away as it started (`owl.sandbox.raced`): the same check, started again at
    once, at most `AGAIN_MOST` times in a Run; its lost start is no verdict."""
    gone = cp.raced(code)
    if gone is None or lv.started_again >= raced.AGAIN_MOST:
        return False
    lv.started_again += 1
    cp.finish("interrupted", None, None)  # its log, closed; nothing recorded
    lv.check_proc = None
    log.info(
        "run %s: check %s (%s): %s", lv.run_id, cp.index + 1, cp.check.name, raced.again_words(gone)
    )
    start_check(eng, lv, cp.index)
    return True


def record_check(eng: State, lv: Live, result: checksmod.Result) -> None:
    lv.results.append(result)
    eng.store.add_check(
        job_id=lv.job_id,
        run_id=lv.run_id,
        source=lv.ctx.base if lv.ctx else None,
        **result.row(),
    )
