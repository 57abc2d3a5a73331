"""The core's rules about time it did not see pass: a stopped daemon, a sleep."""

from __future__ import annotations

from owl.rules import lifecycle as lc
from owl.rules.lifecycle import Core, Outcome, Phase, Timing


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


# ------------------------------------------------------------------- sleep


def test_sleep_counts_for_the_grace_window_and_ends_a_run_on_wake_never_thaws_it():
    core = frozen_core(grace=10.0)
    # frozen at 1.0, window to 11.0; the lid closes at 2.0 for a night
    assert core.slept(2.0, 8 * 3600.0) == [lc.Term(1)]
    r = core.runs[1]
    assert r.outcome is Outcome.INTERRUPTED and r.reason == lc.GRACE_PASSED
    # the idle reading that comes with the wake does not bring it back
    assert core.idle(2.1) == []
    assert r.phase is Phase.ENDING


def test_a_short_sleep_shortens_the_window_by_its_length():
    core = frozen_core(grace=10.0)
    assert core.slept(3.0, 4.0) == []
    assert core.runs[1].grace_left(3.0) == 4.0  # 11 - 3 - 4 asleep
    assert core.tick(6.9) == []
    assert core.tick(7.0) == [lc.Term(1)]


def test_sleep_does_not_count_toward_timeout_or_stall():
    core = Core(timing=Timing(grace=10.0, timeout=100.0, stall=50.0))
    core.idle(0.0)
    core.started(1, 0.0)
    assert core.slept(10.0, 10 * 3600.0) == []  # a running Run: nothing worked
    assert core.tick(49.0) == []
    assert core.runs[1].phase is Phase.RUNNING


def test_a_paused_run_s_window_counts_sleep_too():
    core = frozen_core(grace=10.0)
    core.pause(1.5)
    [term] = core.slept(2.0, 60.0)
    assert term == lc.Term(1) and core.runs[1].reason == lc.PAUSE_GRACE_PASSED


class FakeClocks:
    def __init__(self) -> None:
        self.awake = 100.0
        self.asleep = 0.0

    def step(self, seconds: float) -> None:
        self.awake += seconds

    def suspend(self, seconds: float) -> None:
        self.asleep += seconds


def test_the_sleep_watch_reports_the_time_the_awake_clock_missed():
    from owl.engine.sleepclock import SleepWatch

    c = FakeClocks()
    w = SleepWatch(awake=lambda: c.awake, total=lambda: c.awake + c.asleep + 5000.0)
    c.step(30.0)
    assert w.slept() == 0.0
    c.suspend(600.0)
    c.step(1.0)
    assert w.slept() == 600.0
    assert w.slept() == 0.0  # said once
    c.suspend(0.4)
    assert w.slept() == 0.0  # noise...
    c.suspend(0.7)
    assert abs(w.slept() - 1.1) < 1e-9  # ...adds up until it counts


def test_where_no_clock_counts_sleep_nothing_is_reported():
    from owl.engine.sleepclock import SleepWatch

    c = FakeClocks()
    w = SleepWatch(awake=lambda: c.awake, total=lambda: c.awake)
    c.suspend(600.0)
    assert w.slept() == 0.0
