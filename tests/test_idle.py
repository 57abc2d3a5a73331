"""Idle detection under a real Xvfb, driven by real xdotool input.

What is real: the X server, its XScreenSaver extension, pynput's listeners,
a session D-Bus (with a stand-in for GNOME's idle monitor, which cannot run
here), psutil reading a power-supply folder. What is not: the battery (a
folder laid out like /sys/class/power_supply) and macOS (`ioreg` parsing only).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from display import DisplayEnv, display_fixture, virtual_display, xdotool

from owl.idle import (
    INPUT_POLL,
    POWER_POLL,
    RETRY,
    IdleMonitor,
    MachineState,
    Plan,  # noqa: E402
    Power,
    choose,
    read_machine,
)
from owl.idle.ioreg import parse_hid_idle_time  # noqa: E402
from owl.idle.base import BackendError  # noqa: E402
from owl.idle.mutter import BUS_NAME, INTERFACE, OBJECT_PATH, MutterReader  # noqa: E402
from owl.idle.xscreensaver import XScreenSaverReader  # noqa: E402

xenv = display_fixture(scope="module")


def wait_for(check: Callable[[], object], timeout: float = 5.0, what: str = "condition"):
    """Poll until `check()` is truthy; return its value or fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


class Counter:
    """An on_input callback that counts, like the engine's: stamp and return."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> None:
        self.n += 1


@pytest.fixture
def on_x(xenv: DisplayEnv, monkeypatch: pytest.MonkeyPatch) -> DisplayEnv:
    """This test process pointed at the shared virtual display."""
    xenv.activate(monkeypatch)
    return xenv


@pytest.fixture
def monitor(on_x: DisplayEnv):
    counter = Counter()
    mon = IdleMonitor(counter)
    mon.counter = counter  # type: ignore[attr-defined]
    mon.start()
    yield mon
    mon.stop()


# ------------------------------------------------------------------ hooks + X


def test_backends_on_x11(monitor: IdleMonitor) -> None:
    assert monitor.backends == ["pynput-x11", "xscreensaver"]
    assert monitor.hooks_live
    assert monitor.problem is None


def test_hooks_see_xdotool_mousemove(monitor: IdleMonitor, on_x: DisplayEnv) -> None:
    before = monitor.counter.n  # type: ignore[attr-defined]
    xdotool(on_x, "mousemove", "200", "150")
    wait_for(lambda: monitor.counter.n > before, what="on_input after mousemove")  # type: ignore[attr-defined]


def test_hooks_see_xdotool_key(monitor: IdleMonitor, on_x: DisplayEnv) -> None:
    # A fresh monitor has seen nothing: only the key can move the counter.
    assert monitor.counter.n == 0  # type: ignore[attr-defined]
    xdotool(on_x, "key", "a")
    # press + release
    wait_for(lambda: monitor.counter.n == 2, what="on_input after key")  # type: ignore[attr-defined]
    assert monitor.idle_seconds() < 1.0


def test_xscreensaver_idle_resets_on_input_and_grows(on_x: DisplayEnv) -> None:
    reader = XScreenSaverReader(on_x["DISPLAY"])
    reader.open()
    try:
        xdotool(on_x, "mousemove", "300", "300")
        assert reader.idle_seconds() < 0.3
        wait_for(lambda: reader.idle_seconds() >= 0.6, timeout=3, what="idle time to grow")
        xdotool(on_x, "key", "b")
        assert reader.idle_seconds() < 0.3
    finally:
        reader.close()


# python-xlib leaves its TCP fallback socket for the collector when no server answers.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_xscreensaver_reader_fails_cleanly_without_server() -> None:
    reader = XScreenSaverReader(":4711")
    with pytest.raises(BackendError, match="cannot open X display :4711"):
        reader.open()
    with pytest.raises(BackendError):
        reader.idle_seconds()


def test_read_machine_in_use_then_idle_after_quiet(monitor: IdleMonitor, on_x: DisplayEnv) -> None:
    power = Power()
    # One xdotool process nudging the mouse every 0.3 s for about 2 s.
    steps: list[str] = []
    for i in range(7):
        steps += ["mousemove_relative", "--", str(1 if i % 2 else -1), "0", "sleep", "0.3"]
    nudger = subprocess.Popen(["xdotool", *steps[:-2]], env=on_x)
    try:
        while nudger.poll() is None:
            state = read_machine(monitor, power, after=1.0, require_ac=False, now=time.monotonic())
            assert not state.idle and state.reason == "in use", state
            assert 0 < state.recheck_in <= 1.0
            time.sleep(0.05)
    finally:
        nudger.wait(10)
    assert nudger.returncode == 0
    stopped = time.monotonic()
    # Sleep as the engine would: as long as the state says it may stay the same.
    # (A hook event delivered late may push the answer a little further.)
    now = time.monotonic()
    state = read_machine(monitor, power, after=1.0, require_ac=False, now=now)
    for _ in range(10):
        if state.idle:
            break
        assert state.reason == "in use" and state.recheck_in is not None
        time.sleep(state.recheck_in)
        now = time.monotonic()
        state = read_machine(monitor, power, after=1.0, require_ac=False, now=now)
    assert state.idle, state
    assert state.reason is None
    assert 1.0 <= state.idle_for < 1.5
    assert 1.0 <= now - stopped + 0.05 and now - stopped < 1.5  # ~1 s after the input stopped
    assert state.recheck_in is None  # hooks are live: only input can change it now


# ---------------------------------------------------------------------- power


def make_supply(root: Path, *, battery: str | None, ac_online: int | None) -> None:
    """A folder laid out like /sys/class/power_supply."""
    if battery is not None:
        bat = root / "BAT0"
        bat.mkdir(parents=True, exist_ok=True)
        for name, value in {
            "type": "Battery",
            "status": battery,
            "capacity": "80",
            "energy_now": "40000000",
            "energy_full": "50000000",
            "power_now": "10000000",
        }.items():
            (bat / name).write_text(value + "\n")
    if ac_online is not None:
        ac = root / "AC"
        ac.mkdir(parents=True, exist_ok=True)
        (ac / "type").write_text("Mains\n")
        (ac / "online").write_text(f"{ac_online}\n")
    root.mkdir(parents=True, exist_ok=True)


def test_on_battery_is_not_idle_and_plugging_in_makes_it_idle(
    monitor: IdleMonitor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_supply(tmp_path, battery="Discharging", ac_online=0)
    monkeypatch.setenv("OWL_POWER_SUPPLY_PATH", str(tmp_path))
    power = Power()
    assert power.on_ac() is False
    state = read_machine(monitor, power, after=0.0, require_ac=True, now=time.monotonic())
    assert (state.idle, state.on_ac, state.reason) == (False, False, "on battery")
    assert state.recheck_in == POWER_POLL  # unplugging raises no event: look again
    # Not required: battery does not matter.
    state = read_machine(monitor, power, after=0.0, require_ac=False, now=time.monotonic())
    assert state.idle and state.on_ac is False
    # Plug the charger in, mid-run.
    (tmp_path / "AC" / "online").write_text("1\n")
    (tmp_path / "BAT0" / "status").write_text("Charging\n")
    state = read_machine(monitor, power, after=0.0, require_ac=True, now=time.monotonic())
    assert (state.idle, state.on_ac, state.reason) == (True, True, None)


def test_no_battery_is_on_ac(tmp_path: Path) -> None:
    make_supply(tmp_path, battery=None, ac_online=None)
    assert Power(str(tmp_path)).on_ac() is True


def test_power_plugged_unknown_is_not_ac(monitor: IdleMonitor, tmp_path: Path) -> None:
    make_supply(tmp_path, battery="Unknown", ac_online=None)
    power = Power(str(tmp_path))
    assert power.on_ac() is None
    state = read_machine(monitor, power, after=0.0, require_ac=True, now=time.monotonic())
    assert (state.idle, state.on_ac, state.reason) == (False, None, "power unknown")


def test_battery_status_alone_decides_without_ac_folder(tmp_path: Path) -> None:
    make_supply(tmp_path, battery="Discharging", ac_online=None)
    assert Power(str(tmp_path)).on_ac() is False
    (tmp_path / "BAT0" / "status").write_text("Full\n")
    assert Power(str(tmp_path)).on_ac() is True


def test_charger_under_another_name_is_found(tmp_path: Path) -> None:
    # psutil knows only AC/AC0; a laptop's charger may be ADP1, and a battery
    # held at its charge limit says "Not charging" while plugged in.
    make_supply(tmp_path, battery="Not charging", ac_online=None)
    adp = tmp_path / "ADP1"
    adp.mkdir()
    (adp / "type").write_text("Mains\n")
    (adp / "online").write_text("1\n")
    power = Power(str(tmp_path))
    assert power.on_ac() is True
    (adp / "online").write_text("0\n")
    assert power.on_ac() is False


def test_power_env_does_not_leak_into_psutil(tmp_path: Path) -> None:
    make_supply(tmp_path, battery="Discharging", ac_online=0)
    Power(str(tmp_path)).on_ac()
    if sys.platform.startswith("linux"):
        from psutil import _pslinux

        assert _pslinux.POWER_SUPPLY_PATH == "/sys/class/power_supply"


# ------------------------------------------------------------ cannot be read


def test_no_display_cannot_be_read(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    for key in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "DBUS_SESSION_BUS_ADDRESS"):
        monkeypatch.delenv(key, raising=False)
    mon = IdleMonitor(Counter())
    with caplog.at_level(logging.INFO, logger="owl.idle"):
        mon.start()
    try:
        assert mon.problem == "no DISPLAY"
        assert mon.idle_seconds() is None and mon.last_input() is None
        assert not mon.hooks_live and mon.backends == []
        state = read_machine(mon, Power(), after=0.0, require_ac=False, now=time.monotonic())
        assert state == MachineState(False, None, True, "input cannot be read: no DISPLAY", RETRY)
        assert "input cannot be read: no DISPLAY" in caplog.text
    finally:
        mon.stop()


def test_x_server_killed_while_monitor_runs(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    changed = threading.Event()
    with virtual_display() as env:
        env.activate(monkeypatch)
        mon = IdleMonitor(Counter(), on_change=changed.set)
        mon.start()
        try:
            assert mon.hooks_live and mon.idle_seconds() is not None
            with caplog.at_level(logging.INFO, logger="owl.idle"):
                env.kill_x()
                assert changed.wait(5), "on_change not called when the hooks died"
                assert not mon.hooks_live
                assert mon.idle_seconds() is None
                assert mon.idle_seconds() is None  # asking again neither raises nor logs more
            assert "went away" in mon.problem
            state = read_machine(mon, Power(), after=0.0, require_ac=False, now=time.monotonic())
            assert not state.idle and state.reason.startswith("input cannot be read: X server")
            assert state.recheck_in == RETRY
            failures = [r for r in caplog.records if "xscreensaver failed" in r.getMessage()]
            assert len(failures) == 1
        finally:
            mon.stop()


def test_recovers_when_x_server_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = Counter()
    with virtual_display() as env:
        env.activate(monkeypatch)
        mon = IdleMonitor(counter, retry_every=0.2)
        mon.start()
        try:
            env.kill_x()
            wait_for(lambda: not mon.hooks_live, what="hooks to notice the dead server")
            assert mon.idle_seconds() is None
            # A new X server on the same display, as after a new login.
            number = env["DISPLAY"].lstrip(":")
            xvfb = subprocess.Popen(
                ["Xvfb", f":{number}", "-nolisten", "tcp", "-noreset"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_for(
                    lambda: mon.idle_seconds() is not None,
                    timeout=10,
                    what="the reader to come back",
                )
                assert mon.hooks_live and mon.problem is None
                before = counter.n
                xdotool(env, "mousemove", "50", "60")
                wait_for(lambda: counter.n > before, what="events from the new server")
            finally:
                mon.stop()
                xvfb.terminate()
                xvfb.wait(5)
        finally:
            mon.stop()


STARTS_EARLY = """
import os, sys, time
from owl.idle import IdleMonitor
mon = IdleMonitor(lambda: None, retry_every=0.1)
mon.start()
print(repr(mon.problem), mon.idle_seconds(), flush=True)
sys.stdin.readline()          # the X server is up now
deadline = time.monotonic() + 10
while mon.idle_seconds() is None and time.monotonic() < deadline:
    time.sleep(0.05)
print(mon.backends, mon.problem, flush=True)
mon.stop()
"""


def test_started_before_the_x_server() -> None:
    """Autostart may win the race with X: pynput's import fails, then must work.

    In a fresh process, since pynput is already imported in this one.
    """
    # A display number of this worker's own (pytest-xdist runs tests side by side).
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").lstrip("gw") or 0)
    lowest = 100 + 40 * worker
    number = next(
        n
        for n in range(lowest, lowest + 40)
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists()
    )
    child_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DBUS_SESSION_BUS_ADDRESS", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")
    }
    child_env["DISPLAY"] = f":{number}"
    xvfb = None
    with subprocess.Popen(
        [sys.executable, "-c", STARTS_EARLY],
        env=child_env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as child:
        try:
            first = child.stdout.readline()
            assert first.startswith("'cannot open X display") and first.strip().endswith("None"), (
                first
            )
            xvfb = subprocess.Popen(
                ["Xvfb", f":{number}", "-nolisten", "tcp", "-noreset"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "['pynput-x11', 'xscreensaver'] None"
            assert child.wait(10) == 0
        finally:
            if child.poll() is None:
                child.kill()
            if xvfb is not None:
                xvfb.terminate()
                xvfb.wait(5)


# ------------------------------------------------- GNOME's idle monitor (D-Bus)


class FakeMutter:
    """Serves org.gnome.Mutter.IdleMonitor.GetIdletime on a real session bus."""

    def __init__(self, address: str, idle_ms: int) -> None:
        self.idle_ms = idle_ms
        self.calls = 0
        self._address = address
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "FakeMutter":
        self._thread.start()
        assert self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _serve(self) -> None:
        from jeepney import MessageType, new_error, new_method_return
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
        from jeepney.low_level import HeaderFields

        with open_dbus_connection(bus=self._address) as conn:
            conn.send_and_get_reply(message_bus.RequestName(BUS_NAME), timeout=5)
            self._ready.set()
            while not self._stop.is_set():
                try:
                    msg = conn.receive(timeout=0.05)
                except TimeoutError:
                    continue
                fields = msg.header.fields
                if (
                    msg.header.message_type is MessageType.method_call
                    and fields.get(HeaderFields.path) == OBJECT_PATH
                    and fields.get(HeaderFields.interface) == INTERFACE
                    and fields.get(HeaderFields.member) == "GetIdletime"
                ):
                    self.calls += 1
                    conn.send(new_method_return(msg, "t", (self.idle_ms,)))
                elif msg.header.message_type is MessageType.method_call:
                    # No watches here: an old or stripped-down monitor.
                    conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod"))


def test_mutter_reader_over_session_bus(xenv: DisplayEnv) -> None:
    reader = MutterReader(bus=xenv["DBUS_SESSION_BUS_ADDRESS"])
    with pytest.raises(BackendError, match="not there"):
        reader.open()  # nobody owns the name yet
    with FakeMutter(xenv["DBUS_SESSION_BUS_ADDRESS"], idle_ms=12_345) as mutter:
        reader.open()
        assert reader.idle_seconds() == pytest.approx(12.345)
        mutter.idle_ms = 20
        assert reader.idle_seconds() == pytest.approx(0.02)
    reader.close()


def test_wayland_session_polls_mutter_when_its_watches_are_refused(
    on_x: DisplayEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The event-driven path, against the real mutter, is in test_idle_wayland.py.
    monkeypatch.setenv("XDG_SESSION_TYPE", "wayland")
    monkeypatch.delenv("XDG_CURRENT_DESKTOP", raising=False)
    with FakeMutter(on_x["DBUS_SESSION_BUS_ADDRESS"], idle_ms=30_000):
        mon = IdleMonitor(Counter())
        mon.start()
        try:
            assert mon.backends == ["mutter"] and not mon.hooks_live
            assert mon.idle_seconds() == pytest.approx(30.0, abs=0.1)
            state = read_machine(mon, Power(), after=10.0, require_ac=False, now=time.monotonic())
            assert state.idle and state.recheck_in == INPUT_POLL
        finally:
            mon.stop()
    # Without GNOME's monitor a Wayland session cannot be read (pynput would be blind).
    mon = IdleMonitor(Counter())
    mon.start()
    try:
        assert mon.idle_seconds() is None
        assert mon.problem == (
            "Wayland session without WAYLAND_DISPLAY, and GNOME's idle "
            "monitor is not on the session bus"
        )
    finally:
        mon.stop()


def test_falls_back_to_mutter_when_x_goes_away(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    with virtual_display() as env:
        env.activate(monkeypatch)
        with FakeMutter(env["DBUS_SESSION_BUS_ADDRESS"], idle_ms=7_000):
            mon = IdleMonitor(Counter())
            mon.start()
            try:
                assert mon.backends == ["pynput-x11", "xscreensaver"]
                env.kill_x()
                wait_for(lambda: not mon.hooks_live, what="hooks to die")
                assert mon.idle_seconds() == pytest.approx(7.0, abs=0.1)
                assert mon.backends == ["mutter"] and mon.problem is None
                assert "idle reader xscreensaver failed: X server" in caplog.text
            finally:
                mon.stop()


# ------------------------------------------------------------------- choosing


def test_choose_by_platform_and_session() -> None:
    def names(plan: Plan) -> tuple:
        return (plan.hooks.name if plan.hooks else None, [r.name for r in plan.readers], plan.limit)

    assert names(choose("linux", {"DISPLAY": ":0"})) == (
        "pynput-x11",
        ["xscreensaver", "mutter"],
        None,
    )
    assert names(choose("linux", {"DISPLAY": ":0", "XDG_SESSION_TYPE": "wayland"})) == (
        None,
        [],
        "Wayland session without WAYLAND_DISPLAY, and no session D-Bus for GNOME's idle monitor",
    )
    gnome = {"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "ubuntu:GNOME"}
    assert names(choose("linux", gnome)) == ("mutter-watch", ["mutter"], None)
    assert names(choose("linux", {})) == (None, [], "no DISPLAY")
    assert names(choose("linux", {"DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"}))[1] == ["mutter"]
    assert names(choose("darwin", {})) == ("pynput-darwin", ["ioreg"], None)
    assert names(choose("win32", {}))[0] == "pynput-win32"


def test_failing_callback_does_not_stop_the_hooks(on_x: DisplayEnv, caplog) -> None:
    calls = []

    def explode() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    mon = IdleMonitor(explode)
    mon.start()
    try:
        xdotool(on_x, "mousemove", "400", "10")
        wait_for(lambda: calls, what="first callback")
        xdotool(on_x, "mousemove", "10", "400")
        n = len(calls)
        xdotool(on_x, "mousemove", "400", "400")
        wait_for(lambda: len(calls) > n, what="callbacks after a failure")
        assert mon.hooks_live
        assert caplog.text.count("on_input failed") == 1
    finally:
        mon.stop()


# ------------------------------------------------------------- macOS parsing

IOREG_SAMPLE = """\
+-o IOHIDSystem  <class IOHIDSystem, id 0x100000435, registered, matched, active, busy 0 (0 ms), retain 30>
    {
      "IOClass" = "IOHIDSystem"
      "HIDParameters" = {"HIDClickTime"=500000000,"HIDIdleTime"=1}
      "HIDIdleTime" = 2537000000
      "IOProviderClass" = "IOResources"
    }
"""


def test_parse_hid_idle_time() -> None:
    # The top-level key, not the one inside HIDParameters' dictionary syntax.
    assert parse_hid_idle_time(IOREG_SAMPLE) == pytest.approx(2.537)
    assert parse_hid_idle_time('"HIDIdleTime" = 0') == 0.0
    with pytest.raises(BackendError, match="no HIDIdleTime"):
        parse_hid_idle_time("+-o IOHIDSystem\n")


# ------------------------------------------------------------ policy, pure


class StubMonitor:
    """Our own monitor interface with a fixed answer (the policy is pure)."""

    def __init__(self, last: float | None, hooks_live: bool = True, problem: str | None = None):
        self._last, self.hooks_live, self.problem = last, hooks_live, problem

    def last_input(self) -> float | None:
        return self._last


class StubPower:
    def __init__(self, on_ac: bool | None) -> None:
        self._on_ac = on_ac

    def on_ac(self) -> bool | None:
        return self._on_ac


@pytest.mark.parametrize(
    "last, hooks, on_ac, require_ac, want",
    [
        # quiet for 4 s of 10: in use, look again when 10 s is reached
        (96.0, True, True, True, (False, 4.0, "in use", 6.0)),
        (96.0, True, True, False, (False, 4.0, "in use", 6.0)),
        # in use on battery: still "in use"; power is polled
        (99.0, True, False, True, (False, 1.0, "in use", 9.0)),
        (50.0, True, False, True, (False, 50.0, "on battery", POWER_POLL)),
        (50.0, True, None, True, (False, 50.0, "power unknown", POWER_POLL)),
        # idle with live hooks: nothing to poll unless power matters
        (50.0, True, True, False, (True, 50.0, None, None)),
        (50.0, True, False, False, (True, 50.0, None, None)),
        (50.0, True, True, True, (True, 50.0, None, POWER_POLL)),
        # idle without hooks: a return is only seen by asking
        (50.0, False, True, False, (True, 50.0, None, INPUT_POLL)),
        # a clock that disagrees slightly never yields negative idle
        (100.5, True, True, False, (False, 0.0, "in use", 10.0)),
    ],
)
def test_policy(last, hooks, on_ac, require_ac, want) -> None:
    state = read_machine(
        StubMonitor(last, hooks), StubPower(on_ac), after=10.0, require_ac=require_ac, now=100.0
    )
    assert (state.idle, state.idle_for, state.reason, state.recheck_in) == want
    assert state.on_ac is on_ac


def test_policy_unreadable() -> None:
    state = read_machine(
        StubMonitor(None, False, "X server :3 went away"),
        StubPower(True),
        after=10.0,
        require_ac=True,
        now=100.0,
    )
    assert state == MachineState(
        False, None, True, "input cannot be read: X server :3 went away", min(RETRY, POWER_POLL)
    )


# ------------------------------------------------------- the desktop helper


def test_virtual_display_with_tray_and_notifications_comes_and_goes() -> None:
    from display import _bus_name_owned, _tray_owned

    with virtual_display(tray=True, notify=True) as env:
        assert _tray_owned(env["DISPLAY"])()
        assert _bus_name_owned(env["DBUS_SESSION_BUS_ADDRESS"], "org.freedesktop.Notifications")()
        assert env["NO_AT_BRIDGE"] == "1" and "WAYLAND_DISPLAY" not in env
        procs = dict(env.processes)
        assert set(procs) == {"xvfb", "dbus", "trayer", "dunst"}
        assert all(p.poll() is None for p in procs.values())
    assert all(p.poll() is not None for p in procs.values())
    assert not Path(f"/tmp/.X11-unix/X{env['DISPLAY'].lstrip(':')}").exists()
