"""The pure Run core, driven with a fake clock: every transition, as tables."""

from __future__ import annotations

import pytest

from owl.rules.lifecycle import (
    KILL_DELAY,
    MACHINE,
    USER,
    Core,
    EndedBy,
    Finish,
    Freeze,
    Kill,
    Outcome,
    Phase,
    Refusal,
    Term,
    Thaw,
    Timing,
)

GRACE = 60.0


def core(*, idle: bool = True, **kw) -> Core:
    c = Core(timing=Timing(grace=GRACE, timeout=3600.0, stall=600.0), **kw)
    if idle:
        c.idle(0.0)
    return c


def running(exempt: bool = False, idle: bool = True) -> Core:
    c = core(idle=idle)
    c.started(1, 0.0, exempt=exempt)
    return c


def finish(c: Core, now: float, code: int | None = None) -> Finish:
    if code is not None:
        c.exited(1, now, code)
    [f] = c.gone(1, now)
    assert isinstance(f, Finish)
    return f


# --------------------------------------------------------------- may_start


@pytest.mark.parametrize(
    "setup, expected",
    [
        (lambda c: None, (True, None)),
        (lambda c: c.input(1), (False, "the machine is in use")),
        (lambda c: c.power(1, False), (False, "on battery")),
        (lambda c: c.pause(1), (False, "paused")),
        (lambda c: (c.input(1), c.shift_on(1)), (True, None)),
        (lambda c: (c.power(1, False), c.shift_on(1)), (True, None)),
        (lambda c: (c.power(1, False), c.shift_on(1, require_power=True)), (False, "on battery")),
        (lambda c: (c.shift_on(1), c.pause(2)), (False, "paused")),
    ],
)
def test_may_start(setup, expected):
    c = core()
    setup(c)
    assert c.may_start() == expected


def test_nothing_starts_before_the_machine_is_known_idle():
    assert Core().may_start() == (False, "the machine is in use")


# ------------------------------------------------------ the machine's rule


@pytest.mark.parametrize(
    "event, frozen",
    [
        (lambda c, t: c.input(t), True),
        (lambda c, t: c.power(t, False), True),
        (lambda c, t: c.power(t, True), False),
        (lambda c, t: c.idle(t), False),
        (lambda c, t: c.tick(t), False),
        (lambda c, t: c.output(1, t), False),
    ],
)
def test_events_on_a_running_run(event, frozen):
    c = running()
    actions = event(c, 5.0)
    r = c.runs[1]
    if frozen:
        assert actions == [Freeze(1)]
        assert r.phase is Phase.FROZEN and r.frozen_by == MACHINE
        assert r.grace_left(5.0) == GRACE
    else:
        assert actions == []
        assert r.phase is Phase.RUNNING


def test_input_freezes_then_idle_inside_the_window_thaws_the_same_run():
    c = running()
    assert c.input(10.0) == [Freeze(1)]
    assert c.input(11.0) == []  # already frozen: nothing more
    assert c.tick(10.0 + GRACE - 0.1) == []
    assert c.idle(10.0 + GRACE - 0.1) == [Thaw(1)]
    assert c.runs[1].phase is Phase.RUNNING
    f = finish(c, 100.0, code=0)
    assert (f.outcome, f.ended_by, f.reason) == (Outcome.SUCCEEDED, EndedBy.EXIT, None)


def test_what_an_input_would_freeze_is_asked_without_deciding_anything():
    c = running()
    c.started(2, 0.0, exempt=True)  # started by the person: never frozen by input
    assert c.freezes_on_input() == [1]
    assert not c.in_use and c.runs[1].phase is Phase.RUNNING  # nothing decided
    c.pause(1.0)
    assert c.freezes_on_input() == []  # frozen already, by the person
    c.resume(2.0)
    c.shift_on(3.0)
    assert c.freezes_on_input() == []  # a Shift's Runs go on while the person works
    c.shift_off(4.0)
    c.power(5.0, False)
    assert c.freezes_on_input() == []  # frozen already, by the battery


def test_grace_expiry_terms_then_kills_a_run_that_stays():
    c = running()
    c.input(10.0)
    deadline = 10.0 + GRACE
    assert c.tick(deadline - 0.001) == []
    assert c.tick(deadline) == [Term(1)]
    assert c.runs[1].phase is Phase.ENDING
    assert c.idle(deadline + 1) == []  # too late: ending is ending
    assert c.tick(deadline + KILL_DELAY - 0.001) == []
    assert c.tick(deadline + KILL_DELAY) == [Kill(1)]
    f = finish(c, deadline + KILL_DELAY + 0.1, code=-9)
    assert (f.outcome, f.ended_by) == (Outcome.INTERRUPTED, EndedBy.SIGKILL)
    assert "grace window" in f.reason
    assert f.exit_code == -9


def test_grace_expiry_for_a_run_that_stops_when_asked_is_sigterm():
    c = running()
    c.input(10.0)
    c.tick(10.0 + GRACE)
    assert c.exited(1, 10.0 + GRACE + 0.2, 143) == []
    f = finish(c, 10.0 + GRACE + 0.3)
    assert (f.outcome, f.ended_by, f.exit_code) == (Outcome.INTERRUPTED, EndedBy.SIGTERM, 143)


def test_leftovers_of_an_exited_agent_are_killed_but_it_ended_by_exit():
    c = running()
    assert c.exited(1, 5.0, 0) == [Term(1)]  # what it left behind goes too
    assert c.tick(5.0 + KILL_DELAY) == [Kill(1)]
    f = finish(c, 5.0 + KILL_DELAY + 0.1)
    assert (f.outcome, f.ended_by) == (Outcome.SUCCEEDED, EndedBy.EXIT)


@pytest.mark.parametrize(
    "code, outcome, reason",
    [
        (0, Outcome.SUCCEEDED, None),
        (1, Outcome.FAILED, "the agent exited with code 1"),
        (7, Outcome.FAILED, "the agent exited with code 7"),
    ],
)
def test_exit_codes(code, outcome, reason):
    c = running()
    f = finish(c, 5.0, code=code)
    assert (f.outcome, f.reason, f.exit_code, f.ended_by) == (outcome, reason, code, EndedBy.EXIT)


def test_battery_freezes_and_ac_thaws_inside_the_window():
    c = running()
    assert c.power(5.0, False) == [Freeze(1)]
    assert c.may_start() == (False, "on battery")
    assert c.power(6.0, True) == [Thaw(1)]


def test_ac_alone_does_not_thaw_while_the_person_is_at_the_machine():
    c = running()
    c.input(5.0)
    c.power(6.0, False)
    assert c.power(7.0, True) == []
    assert c.idle(8.0) == [Thaw(1)]


# ------------------------------------------------------------- the person


def test_pause_freezes_and_the_machine_never_thaws_it():
    c = running()
    assert c.pause(5.0) == [Freeze(1)]
    assert c.runs[1].frozen_by == USER
    assert c.idle(6.0) == []
    assert c.power(6.0, True) == []
    assert c.may_start() == (False, "paused")


def test_pause_takes_over_a_machine_freeze_and_keeps_its_deadline():
    c = running()
    c.input(5.0)
    assert c.pause(20.0) == []
    assert c.runs[1].frozen_by == USER
    assert c.runs[1].deadline == 5.0 + GRACE
    assert c.idle(21.0) == []


def test_a_forgotten_pause_still_ends_the_run():
    c = running()
    c.pause(5.0)
    assert c.tick(5.0 + GRACE) == [Term(1)]
    c.exited(1, 5.0 + GRACE + 0.1, 143)
    f = finish(c, 5.0 + GRACE + 0.2)
    assert f.outcome is Outcome.INTERRUPTED and "paused" in f.reason
    assert c.paused  # the hold outlives the Run


def test_pause_twice_is_refused_and_pause_with_nothing_running_holds():
    c = core()
    assert c.pause(1.0) == []
    assert c.paused
    with pytest.raises(Refusal, match="already paused"):
        c.pause(2.0)


def test_resume_while_idle_thaws():
    c = running()
    c.pause(5.0)
    assert c.resume(6.0) == [Thaw(1)]
    assert not c.paused


def test_resume_while_in_use_hands_the_run_back_to_the_machine():
    c = running()
    c.pause(5.0)
    c.input(6.0)
    assert c.resume(7.0) == []
    r = c.runs[1]
    assert r.phase is Phase.FROZEN and r.frozen_by == MACHINE
    assert r.deadline == 5.0 + GRACE  # the window keeps running
    assert c.idle(8.0) == [Thaw(1)]


def test_resume_without_a_hold_is_refused():
    with pytest.raises(Refusal, match="not paused"):
        running().resume(1.0)


def test_started_with_owl_start_is_not_frozen_by_input_but_is_by_pause():
    c = running(exempt=True, idle=False)
    assert c.runs[1].phase is Phase.RUNNING
    assert c.input(5.0) == []
    assert c.power(5.0, False) == []
    assert c.pause(6.0) == [Freeze(1)]
    assert c.resume(7.0) == [Thaw(1)]  # exempt: resume lets it go on


def test_stop_freezes_and_ends_after_the_grace_window():
    c = running()
    assert c.stop(5.0) == [Freeze(1)]
    assert c.idle(6.0) == []  # the machine does not undo a stop
    assert c.tick(5.0 + GRACE) == [Term(1)]
    c.exited(1, 5.0 + GRACE, 0)
    f = finish(c, 5.0 + GRACE)
    assert f.outcome is Outcome.INTERRUPTED and f.reason == "stopped by the user"
    assert not c.paused  # stop ends this work, not work


def test_stop_force_ends_at_once():
    c = running()
    c.input(1.0)
    assert c.stop(5.0, force=True) == [Term(1)]
    assert c.tick(5.0 + KILL_DELAY) == [Kill(1)]
    f = finish(c, 10.1)
    assert (f.outcome, f.ended_by, f.reason) == (
        Outcome.INTERRUPTED,
        EndedBy.SIGKILL,
        "stopped by the user",
    )


def test_stop_with_nothing_live_is_refused():
    with pytest.raises(Refusal, match="no Run is live"):
        core().stop(1.0)


def test_stop_shortens_but_never_lengthens_a_window():
    c = running()
    c.input(0.0)
    c.stop(GRACE - 1)
    assert c.runs[1].deadline == GRACE


# ------------------------------------------------------- time-based ends


def test_timeout_ends_failed_and_frozen_time_does_not_count():
    c = running()
    c.input(100.0)
    c.idle(400.0)  # 300 s frozen
    c.output(1, 3600.0)
    assert c.tick(3650.0) == []  # 3350 s active
    c.output(1, 3899.0)
    assert c.tick(3900.0) == [Term(1)]
    f = finish(c, 3900.1, code=143)
    assert f.outcome is Outcome.FAILED and "runs.timeout" in f.reason


def test_stall_ends_failed_and_silence_while_frozen_is_not_a_stall():
    c = running()
    c.input(100.0)
    c.idle(650.0)  # silent 650 s, but frozen
    assert c.tick(700.0) == []
    assert c.tick(650.0 + 600.0) == [Term(1)]
    f = finish(c, 1300.0, code=143)
    assert f.outcome is Outcome.FAILED and "runs.stall" in f.reason


def test_output_keeps_a_run_from_stalling():
    c = running()
    for t in range(100, 2000, 100):
        c.output(1, float(t))
        assert c.tick(float(t)) == []


def test_kill_is_repeated_for_a_wedged_tree():
    c = running()
    c.stop(0.0, force=True)
    assert c.tick(KILL_DELAY) == [Kill(1)]
    assert c.tick(KILL_DELAY + 1) == []
    assert c.tick(2 * KILL_DELAY) == [Kill(1)]


def test_next_deadline_follows_the_state():
    c = running()
    assert c.next_deadline() == 600.0  # stall before timeout
    c.input(10.0)
    assert c.next_deadline() == 10.0 + GRACE
    c.tick(10.0 + GRACE)
    assert c.next_deadline() == 10.0 + GRACE + KILL_DELAY
    assert core().next_deadline() is None


# --------------------------------------------------------------- shifts


def test_a_shift_thaws_machine_frozen_runs_and_input_freezes_nothing():
    c = running()
    c.input(5.0)
    assert c.shift_on(6.0) == [Thaw(1)]
    assert c.input(7.0) == []
    assert c.power(8.0, False) == []


def test_a_shift_that_requires_power_freezes_on_battery():
    c = running()
    c.shift_on(1.0, require_power=True)
    assert c.input(2.0) == []
    assert c.power(3.0, False) == [Freeze(1)]
    assert c.power(4.0, True) == [Thaw(1)]


def test_when_a_shift_ends_its_runs_are_the_machines_again():
    """The person is there when the Shift ends: its Run freezes at once (the
    machine is theirs again); nobody there: it carries on."""
    c = core(idle=False)
    c.shift_on(0.0)
    c.started(1, 1.0)
    assert c.shift_off(2.0) == [Freeze(1)]
    assert c.runs[1].frozen_by == "machine" and not c.runs[1].exempt
    assert c.idle(3.0) == [Thaw(1)]  # they left within the window: it goes on
    c.started(2, 4.0, exempt=True)  # `owl start`'s own Run stays the person's choice
    c.shift_on(5.0)
    c.started(3, 5.5)
    assert c.shift_off(6.0) == []  # nobody there
    assert c.input(7.0) == [Freeze(1), Freeze(3)]
    assert c.runs[2].phase is Phase.RUNNING


def test_pause_holds_a_shift():
    c = core(idle=False)
    c.shift_on(0.0)
    c.started(1, 1.0)
    assert c.pause(2.0) == [Freeze(1)]
    assert c.may_start() == (False, "paused")
    assert c.resume(3.0) == [Thaw(1)]


# ------------------------------------------------------------- shutdown


def test_shutdown_ends_every_live_run_frozen_ones_included():
    c = core()
    c.started(1, 0.0)
    c.started(2, 0.0)
    c.input(1.0)
    actions = c.shutdown(2.0)
    assert sorted(actions, key=lambda a: a.run) == [Term(1), Term(2)]
    assert all(r.phase is Phase.ENDING for r in c.runs.values())
    assert c.tick(2.0 + KILL_DELAY) == [Kill(1), Kill(2)]
    f = finish(c, 8.0, code=-9)
    assert f.outcome is Outcome.INTERRUPTED and f.reason == "the daemon stopped"


def test_end_one_run_for_a_dropped_job():
    c = running()
    assert c.end(1, 5.0, "the job was dropped") == [Term(1)]
    assert c.end(1, 5.0, "again") == []
    assert c.end(99, 5.0, "none") == []


def test_events_for_unknown_runs_are_ignored():
    c = core()
    assert c.exited(5, 1.0, 0) == []
    assert c.gone(5, 1.0) == []
    assert c.output(5, 1.0) == []


# ------------------------------------------------------------ verification

from owl.rules.lifecycle import StartCheck  # noqa: E402

CHECKS = (("tests", 100.0), ("lint", 50.0))


def verifying(checks=CHECKS, idle: bool = True) -> Core:
    """A Run whose agent exited 0 and whose tree is gone: check 0 is running."""
    c = core(idle=idle)
    c.started(1, 0.0, checks=checks)
    assert c.exited(1, 10.0, 0) == [Term(1)]
    return c


def test_checks_run_in_order_after_the_agent_and_the_last_pass_finishes_succeeded():
    c = verifying()
    assert c.runs[1].state == "ending"
    assert c.gone(1, 10.5) == [StartCheck(1, 0)]
    assert c.runs[1].state == "verifying" and c.runs[1].phase is Phase.RUNNING
    assert c.exited(1, 20.0, 0) == [Term(1)]  # what the check left goes too
    assert c.gone(1, 20.1) == [StartCheck(1, 1)]
    assert c.exited(1, 30.0, 0) == [Term(1)]
    assert c.gone(1, 30.1) == [Finish(1, Outcome.SUCCEEDED, EndedBy.EXIT, None, 0)]
    assert c.runs == {}


@pytest.mark.parametrize(
    "code, reason",
    [
        (1, "check tests failed (exit 1)"),
        (127, "check tests failed: command not found (exit 127)"),
        (-9, "check tests failed: killed by signal 9"),
    ],
)
def test_a_failing_check_fails_the_run_naming_it_and_no_later_check_runs(code, reason):
    c = verifying()
    c.gone(1, 10.5)
    assert c.exited(1, 20.0, code) == [Term(1)]
    assert c.gone(1, 20.1) == [Finish(1, Outcome.FAILED, EndedBy.EXIT, reason, 0)]


def test_no_checks_finishes_at_once_and_a_failed_agent_runs_none():
    c = core()
    c.started(1, 0.0)
    assert finish(c, 5.0, 0).outcome is Outcome.SUCCEEDED
    c = core()
    c.started(1, 0.0, checks=CHECKS)
    f = finish(c, 5.0, 2)
    assert (f.outcome, f.reason) == (Outcome.FAILED, "the agent exited with code 2")


def test_a_check_that_vanishes_without_an_exit_does_not_pass():
    c = verifying()
    c.gone(1, 10.5)
    [f] = c.gone(1, 12.0)
    assert (f.outcome, f.reason) == (Outcome.FAILED, "check tests ended without an exit status")


def test_a_check_outliving_its_timeout_fails_and_frozen_time_does_not_count():
    c = verifying()
    c.gone(1, 10.0)  # check 0 (100 s) begins at 10
    assert c.next_deadline() == 110.0
    c.input(50.0)  # frozen 50..70: 20 s not counted
    c.idle(70.0)
    assert c.tick(119.0) == []
    assert c.runs[1].check_time(119.0) == pytest.approx(89.0)
    assert c.tick(130.0) == [Term(1)]
    assert c.runs[1].reason == "check tests ran longer than its timeout (1m40s)"
    c.exited(1, 131.0, -15)
    [f] = c.gone(1, 131.0)
    assert (f.outcome, f.ended_by) == (Outcome.FAILED, EndedBy.SIGTERM)


def test_runs_timeout_and_stall_do_not_apply_to_a_check():
    c = verifying(checks=(("slow", 10_000.0),))
    c.gone(1, 10.0)
    assert c.tick(3000.0) == []  # silent past runs.stall (600 s)
    assert c.tick(5000.0) == []  # longer than runs.timeout (3600 s)
    assert 1 in c.runs and c.runs[1].state == "verifying"


def test_input_freezes_a_check_and_idle_thaws_it():
    c = verifying()
    c.gone(1, 10.0)
    assert c.input(11.0) == [Freeze(1)]
    assert c.runs[1].state == "frozen"
    assert c.idle(12.0) == [Thaw(1)]
    assert c.runs[1].state == "verifying"


def test_grace_expiry_during_a_check_interrupts_the_run():
    c = verifying()
    c.gone(1, 10.0)
    c.input(11.0)
    assert c.tick(11.0 + GRACE) == [Term(1)]
    c.exited(1, 72.0, -15)
    [f] = c.gone(1, 72.0)
    assert (f.outcome, f.ended_by, f.reason) == (
        Outcome.INTERRUPTED,
        EndedBy.SIGTERM,
        "the grace window passed while the machine was in use",
    )


def test_a_check_never_begins_while_the_machine_is_in_use_thawing_begins_it():
    c = verifying()
    c.input(10.2)  # the person came back while the agent's tree drained
    assert c.gone(1, 10.5) == [Freeze(1)]
    r = c.runs[1]
    assert r.phase is Phase.FROZEN and not r.check_live and r.frozen_by == MACHINE
    assert c.gone(1, 11.0) == []  # nothing began, so nothing can be gone
    assert c.idle(20.0) == [StartCheck(1, 0)]
    assert r.check_live and r.state == "verifying"


def test_grace_expiry_before_a_check_began_finishes_interrupted():
    c = verifying()
    c.input(10.2)
    c.gone(1, 10.5)
    assert c.tick(10.5 + GRACE) == [Term(1)]
    [f] = c.gone(1, 10.5 + GRACE)
    assert f.outcome is Outcome.INTERRUPTED


@pytest.mark.parametrize(
    "act, by, reason",
    [
        (lambda c: c.pause(10.2), USER, "paused for longer than the grace window"),
        (lambda c: c.stop(10.2), USER, "stopped by the user"),
    ],
)
def test_pause_or_stop_between_steps_holds_the_next_check(act, by, reason):
    c = verifying()
    act(c)
    assert c.gone(1, 10.5) == [Freeze(1)]
    r = c.runs[1]
    assert (r.frozen_by, r.expiry_reason, r.check_live) == (by, reason, False)
    assert c.idle(11.0) == []  # the machine does not undo the person's hold
    assert c.resume(12.0) == [StartCheck(1, 0)]


@pytest.mark.parametrize(
    "act, reason",
    [
        (lambda c: c.shutdown(10.2), "the daemon stopped"),
        (lambda c: c.end(1, 10.2, "the job was dropped"), "the job was dropped"),
        (lambda c: c.stop(10.2, force=True), "stopped by the user"),
    ],
)
def test_ending_a_run_between_steps_starts_no_check(act, reason):
    c = verifying()
    act(c)
    [f] = c.gone(1, 10.5)
    assert (f.outcome, f.reason) == (Outcome.INTERRUPTED, reason)
