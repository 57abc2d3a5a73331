"""The core's rules about time it did not see pass: a stopped daemon, a sleep."""

from __future__ import annotations

from owl import lifecycle as lc
from owl.lifecycle import Core, Outcome, Phase, Timing


def frozen_core(grace: float = 10.0) -> Core:
    core = Core(timing=Timing(grace=grace, timeout=100.0, stall=50.0))
    core.idle(0.0)
    core.started(1, 0.0)
    assert core.input(1.0) == [lc.Freeze(1)]
    return core


def test_an_agent_that_exits_frozen_past_its_window_ends_interrupted_not_failed():
    core = frozen_core()
    assert core.exited(1, 12.0, -15) == [lc.Term(1)]
    r = core.runs[1]
    assert r.outcome is Outcome.INTERRUPTED and r.reason == lc.GRACE_PASSED
    [finish] = core.gone(1, 12.1)
    assert finish.outcome is Outcome.INTERRUPTED and finish.ended_by is lc.EndedBy.SIGTERM


def test_an_agent_that_exits_frozen_inside_its_window_is_its_own_outcome():
    core = frozen_core()
    core.exited(1, 5.0, 3)
    assert core.runs[1].outcome is Outcome.FAILED and core.runs[1].phase is Phase.ENDING
