"""What the engine shows, read on its thread: the status, a Job's view, the Shift's.

Each function takes the engine and runs on its thread (through `Engine.call`),
so it may read the engine's state, and changes none of it. They are the
verbs' side, not the engine's: the engine decides and records; how that
reads to a person (`owl.verbs.statusdoc`, `owl.verbs.views`) stands above
it, so the engine imports nothing of the verbs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from owl.engine import budgeting
from owl.verbs import statusdoc, views
from owl.verbs.holding import job_row

if TYPE_CHECKING:
    from owl.engine.loop import Engine


def job_view(eng: Engine, job_id: int) -> dict[str, Any]:
    """The Job's view; what git adds comes later, off this thread (owl.verbs.caller_side)."""
    job = job_row(eng.store, job_id)
    view = views.with_unrecorded(eng.unrecorded, views.job_view(eng.store, job, git=False))
    view[views.LATER] = lambda v: views.add_git_facts(v, job)
    return view


def shift_view(eng: Engine) -> dict[str, Any] | None:
    """The Shift that is on, for `owl shift` and the status; None when none is."""
    if eng.shift is None:
        return None
    sh, now = eng.shift, time.time()
    return {
        "on": True,
        "ended": False,
        "started_at": views.iso(sh.started_at),
        "ends_at": views.iso(sh.ends_at),
        "left_s": round(sh.left(now), 1),
        "until_empty": sh.until_empty,
        "require_power": sh.require_power,
        "spend": sh.spend,
        "held": eng.core.paused,
    }


def snapshot(eng: Engine) -> statusdoc.Snapshot:
    """What `statusdoc` may read, taken here on the engine thread."""
    return statusdoc.Snapshot(
        now=eng.clock(),
        reading=eng.reading,
        cfg=eng.cfg,
        core=eng.core,
        live=eng.live,
        store=eng.store,
        inhibitor=eng.inhibitor,
        working=eng.working_runs(),
        shift=shift_view(eng),
        waits=eng.waits,
        waiting=eng.waiting if eng.has_pending else None,
        config_problem=eng.config_problem,
        unrecorded=list(eng.unrecorded),
        notify=eng.notifier.view() if eng.notifier is not None else None,
    )


def status(eng: Engine) -> dict[str, Any]:
    """The `owl status --json` document."""
    return {**statusdoc.status(snapshot(eng)), "budget": budgeting.view(eng)}
