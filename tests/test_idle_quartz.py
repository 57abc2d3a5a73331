"""The macOS input backend of Owl's own, against a fake Quartz module.

No Mac is needed: tests/support/fake_quartz.py stands in for PyObjC's Quartz
and plays the system (the Input Monitoring grant, events through the tap,
the HID idle time, a tap switched off for being slow).
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections.abc import Callable

import pytest

from owl.idle import BackendError, IdleMonitor, Plan, choose
from owl.idle.quartz import TAP_DISABLED_BY_TIMEOUT, QuartzHooks, QuartzReader, permission_message
from owl.idle.state import INPUT_POLL, judge, read_machine
from support.fake_quartz import EVENT_TYPES, FakeQuartz

APP = "Owl (/Applications/Owl.app)"


def wait_for(cond: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class Events:
    def __init__(self) -> None:
        self.threads: list[str] = []
        self.dead: list[str] = []

    def on_event(self, *_: object) -> None:
        self.threads.append(threading.current_thread().name)

    def on_dead(self, why: str) -> None:
        self.dead.append(why)


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def hooks_of():
    made: list[QuartzHooks] = []

    def make(q: FakeQuartz, **kw) -> QuartzHooks:
        h = QuartzHooks(q, app=APP, grant_poll=kw.pop("grant_poll", 0.02), **kw)
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


def test_granted_tap_is_listen_only_and_the_callback_only_stamps(hooks_of, events) -> None:
    q = FakeQuartz(granted=True)
    hooks = hooks_of(q)
    hooks.start(events.on_event, events.on_dead)
    assert hooks.alive
    tap = q.live_tap()
    assert (tap.where, tap.place, tap.options) == (
        q.kCGSessionEventTap,
        q.kCGHeadInsertEventTap,
        q.kCGEventTapOptionListenOnly,
    )
    for kind in (
        "kCGEventKeyDown",
        "kCGEventMouseMoved",
        "kCGEventLeftMouseDown",
        "kCGEventScrollWheel",
        "kCGEventFlagsChanged",
        "kCGEventOtherMouseDragged",
    ):
        assert tap.mask & (1 << EVENT_TYPES[kind]), kind
    (loop,) = q.loops
    assert loop.thread.name == "owl-quartz-tap" and loop.sources[0][1] == q.kCFRunLoopCommonModes

    before = time.monotonic()
    assert q.send("kCGEventKeyDown", "key") == "key"  # a listen-only tap passes it on
    assert hooks.last_event is not None and hooks.last_event >= before
    wait_for(lambda: events.threads, what="the event delivered")
    # delivered from a thread of its own, never from the tap's run loop
    assert set(events.threads) == {"owl-quartz-deliver"}
    assert q.requests == 0 and events.dead == []


def test_a_burst_of_events_is_told_once_per_wake(hooks_of, events) -> None:
    q = FakeQuartz()
    hooks = hooks_of(q)
    gate = threading.Event()
    calls: list[float] = []

    def slow(*_: object) -> None:
        calls.append(time.monotonic())
        gate.wait(5)

    hooks.start(slow, events.on_dead)
    q.send()
    wait_for(lambda: calls, what="the first delivery")
    t0 = time.monotonic()
    for _ in range(500):
        q.send()
    assert time.monotonic() - t0 < 0.5  # the callback never waits on the slow reader
    gate.set()
    wait_for(lambda: len(calls) == 2, what="one more delivery for the burst")
    time.sleep(0.05)
    assert len(calls) == 2


def test_tap_switched_off_by_the_system_is_switched_back_on(hooks_of, events) -> None:
    q = FakeQuartz()
    hooks = hooks_of(q)
    hooks.start(events.on_event, events.on_dead)
    tap = q.live_tap()
    assert tap.enables == [True]
    tap.enables.append(False)  # macOS: the callback took too long
    assert tap.callback(None, TAP_DISABLED_BY_TIMEOUT, "e", None) == "e"
    assert tap.enables == [True, False, True] and hooks.alive
    time.sleep(0.05)
    assert events.threads == [], "a switch-off is not input"


def test_without_the_grant_the_tap_hears_the_mouse_and_says_whom_to_grant(
    hooks_of, events, caplog
) -> None:
    q = FakeQuartz(granted=False)
    hooks = hooks_of(q)
    with caplog.at_level(logging.WARNING, "owl.idle"):
        hooks.start(events.on_event, events.on_dead)
    # tried although preflight says no: macOS keeps the mouse, clears the keys
    assert hooks.alive and hooks.waiting_for_grant
    assert not q.live_tap().mask & (1 << EVENT_TYPES["kCGEventKeyDown"])
    assert q.requests == 1, "macOS is asked once to list Owl under Input Monitoring"
    said = [r.getMessage() for r in caplog.records]
    assert any("Input Monitoring" in m and APP in m for m in said), said
    assert q.person_moves() == 1
    wait_for(lambda: events.threads, what="a mouse move before the grant")
    assert q.person_types() == 0, "no keys before the grant"

    q.granted = True  # the person ticks the box
    wait_for(lambda: not hooks.waiting_for_grant, what="a tap made anew once granted")
    assert q.live_tap().mask & (1 << EVENT_TYPES["kCGEventKeyDown"])
    assert q.person_types() == 1
    assert q.requests == 1


def test_preflight_that_lags_behind_the_grant_does_not_keep_the_keys_out(hooks_of, events) -> None:
    """CGPreflightListenEventAccess can say no after the grant until a restart;
    the tap is made all the same and hears the keyboard."""
    q = FakeQuartz(granted=True)
    q.preflight = False
    hooks = hooks_of(q)
    hooks.start(events.on_event, events.on_dead)
    assert hooks.alive and q.person_types() == 1
    wait_for(lambda: events.threads, what="a key press")


def test_a_grant_taken_away_mid_session_is_noticed(hooks_of, events, caplog) -> None:
    q = FakeQuartz(granted=True)
    hooks = hooks_of(q)
    hooks.start(events.on_event, events.on_dead)
    first = q.live_tap()
    with caplog.at_level(logging.WARNING, "owl.idle"):
        q.granted = False  # unticked in System Settings
        wait_for(lambda: not first.valid, what="the granted tap dropped")
        wait_for(lambda: hooks.alive, what="a tap without the keyboard")
    assert not q.live_tap().mask & (1 << EVENT_TYPES["kCGEventKeyDown"])
    assert any("taken away" in r.getMessage() and APP in r.getMessage() for r in caplog.records), (
        caplog.records
    )


def test_a_tap_gone_deaf_is_noticed_by_the_pointer_counter(hooks_of, events, caplog) -> None:
    """Where preflight keeps saying yes but the tap hears nothing any more, the
    HID system's pointer counter gives it away: the tap is dropped and tried anew."""
    q = FakeQuartz(granted=True)
    hooks = hooks_of(q)
    q.pointer_idle = 1000.0
    hooks.start(events.on_event, events.on_dead)
    first = q.live_tap()
    assert q.person_moves() == 1  # heard: not deaf
    time.sleep(1.3)  # many looks, the move now over DEAF_AFTER old
    assert first.valid, "a tap that heard the last move is not deaf"
    with caplog.at_level(logging.WARNING, "owl.idle"):
        q.deaf = True
        q.person_moves()  # the HID system sees it, the tap does not
        wait_for(lambda: not first.valid, what="the deaf tap dropped")
    assert any("stopped hearing the pointer" in r.getMessage() for r in caplog.records)


def test_refused_tap_and_missing_quartz_are_backend_errors(hooks_of, events, monkeypatch) -> None:
    q = FakeQuartz()
    q.refuse_taps = True  # preflight says granted, yet no tap
    with pytest.raises(BackendError, match="Input Monitoring"):
        hooks_of(q).start(events.on_event, events.on_dead)
    monkeypatch.setitem(sys.modules, "Quartz", None)  # PyObjC not installed
    with pytest.raises(BackendError, match="Quartz cannot be loaded"):
        QuartzHooks(app=APP).start(events.on_event, events.on_dead)
    with pytest.raises(BackendError, match="Quartz cannot be loaded"):
        QuartzReader().open()


def test_stop_ends_the_run_loop_and_every_thread(hooks_of, events) -> None:
    q = FakeQuartz()
    hooks = hooks_of(q)
    hooks.start(events.on_event, events.on_dead)
    hooks.stop()
    assert not hooks.alive and not q.taps[0].valid and q.loops[0].stopped.is_set()
    assert not q.loops[0].thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name.startswith("owl-quartz")]
    hooks.stop()  # twice is fine
    assert events.dead == [], "a stop that was asked for is not a death"


def test_reader_asks_the_hid_state_for_any_input() -> None:
    q = FakeQuartz(granted=False)  # reading idle time needs no grant
    reader = QuartzReader(q)
    q.idle = 12.5
    reader.open()
    assert 12.5 <= reader.idle_seconds() < 13.5
    assert set(q.idle_asked) == {(q.kCGEventSourceStateHIDSystemState, q.kCGAnyInputEventType)}
    for bad in (math.nan, -1.0, math.inf):
        q.idle = bad
        with pytest.raises(BackendError):
            reader.idle_seconds()
    reader.close()
    with pytest.raises(BackendError):
        reader.idle_seconds()


def test_monitor_reads_quartz_and_takes_events(hooks_of) -> None:
    q = FakeQuartz(granted=True)
    q.idle = 42.0
    inputs: list[float] = []
    hooks = hooks_of(q)
    mon = IdleMonitor(
        lambda: inputs.append(time.monotonic()), plan=lambda: Plan(hooks, [QuartzReader(q)])
    )
    mon.start()
    try:
        assert mon.backends == ["quartz", "quartz-idle"] and mon.problem is None
        assert mon.hooks_live and mon.hooks_may_miss
        q.person_types()
        wait_for(lambda: inputs, what="on_input")
        assert mon.idle_seconds() < 1.0
    finally:
        mon.stop()


class _OnAC:
    def on_ac(self) -> bool:
        return True


def test_under_secure_input_the_counter_is_read_every_second_while_watching(hooks_of) -> None:
    """A live tap hears no keys under Secure Input (TN2150); the HID counter
    does. While a Run is watched the policy asks for a reading within 2 s,
    tap or no tap, and that reading sees the return."""
    q = FakeQuartz(granted=True)
    q.idle = q.pointer_idle = 600.0
    inputs: list[float] = []
    mon = IdleMonitor(
        lambda: inputs.append(time.monotonic()), plan=lambda: Plan(hooks_of(q), [QuartzReader(q)])
    )
    mon.start()
    try:
        away = read_machine(mon, _OnAC(), after=300.0, require_ac=False, now=time.monotonic())
        assert away.idle and away.recheck_in is not None and away.recheck_in <= 2.0
        q.secure_input = True  # a password field has the keyboard
        assert q.person_types() == 0  # the tap hears nothing...
        time.sleep(0.05)
        assert inputs == []
        back = read_machine(mon, _OnAC(), after=300.0, require_ac=False, now=time.monotonic())
        assert not back.idle and back.reason == "in use"  # ...the counter does
    finally:
        mon.stop()
    # Hooks that hear everything (X11's) need no such reading.
    assert judge(600.0, True, after=300.0, require_ac=False, hooks_live=True).recheck_in is None
    assert (
        judge(
            600.0, True, after=300.0, require_ac=False, hooks_live=True, hooks_may_miss=True
        ).recheck_in
        == INPUT_POLL
    )


def test_the_engine_freezes_a_return_under_secure_input_within_2s(tmp_path, hooks_of) -> None:
    """The real engine and a real agent, over a stand-in Quartz whose tap drops
    every key (Secure Input) while the HID counter resets."""
    from owl.idle.machine import RealMachine
    from owl.verbs import caller_side as verbwork
    from owl.verbs import looking
    from owl.verbs.engine_side import Verbs
    from owlproc import make_project
    from owlproc import wait_for as wait_long
    from test_engine_sleep import engine_in

    q = FakeQuartz(granted=True)
    q.idle = q.pointer_idle = 600.0
    e = engine_in(tmp_path, grace=60.0)
    e.machine = RealMachine(plan=lambda: Plan(hooks_of(q), [QuartzReader(q)]))
    e.start()
    try:
        prep = verbwork.prepare_add(e.cfg, "sleep=120", str(make_project(tmp_path / "p")), None)
        e.call(lambda: Verbs(e).add_prepared(prep, None))
        wait_long(
            lambda: [
                r for r in e.call(lambda: looking.status(e)["runs"]) if r["state"] == "running"
            ],
            timeout=15,
            what="a Run",
        )
        q.secure_input = True
        assert q.person_types() == 0
        t0 = time.monotonic()
        wait_long(
            lambda: [
                r for r in e.call(lambda: looking.status(e)["runs"]) if r["state"] == "frozen"
            ],
            timeout=5,
            interval=0.02,
            what="the Run frozen",
        )
        assert time.monotonic() - t0 < 2.0
    finally:
        assert e.stop(10)


def test_chooser_takes_quartz_where_pyobjc_has_it(monkeypatch) -> None:
    def names(plan: Plan) -> tuple:
        return (plan.hooks.name if plan.hooks else None, [r.name for r in plan.readers])

    monkeypatch.setitem(sys.modules, "Quartz", FakeQuartz())
    assert names(choose("darwin", {})) == ("quartz", ["quartz-idle", "ioreg"])
    assert names(choose("darwin", {"OWL_MACOS_INPUT": "pynput"})) == ("pynput-darwin", ["ioreg"])
    monkeypatch.delitem(sys.modules, "Quartz")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    assert names(choose("darwin", {})) == ("pynput-darwin", ["ioreg"])


def test_permission_message_names_the_setting_and_the_app() -> None:
    text = permission_message("Terminal")
    assert "Input Monitoring" in text and "Terminal" in text and "\n" not in text
