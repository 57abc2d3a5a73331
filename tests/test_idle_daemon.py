"""Idle detection end to end: the real daemon, real input hooks, a real X server.

Every test runs `owl daemon` with the real machine (pynput hooks and the
XScreenSaver reader, `OWL_MACHINE` unset) on a throw-away Xvfb, sends input
with xdotool, and watches what the daemon does to a real agent's processes.
`idle.after` is 1 s so a "person leaving" takes a second. The battery is a
folder laid out like /sys/class/power_supply (`OWL_POWER_SUPPLY_PATH`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from display import DisplayEnv, virtual_display, xdotool
from owl.idle.state import LOCKED_AFTER
from owlproc import OwlDaemon, make_project, process_states, wait_for
from support.need import programs
from support.person import Person
from support.screensaver import Desktop

pytestmark = pytest.mark.timeout(120)

STOPPED = "stopped"


@pytest.fixture
def xenv() -> Iterator[DisplayEnv]:
    # No session bus: the X11 hooks and XScreenSaver are what is under test.
    with virtual_display(dbus=False) as env:
        yield env


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def real_daemon(home: Path, env: dict, config: dict | None = None) -> OwlDaemon:
    """The daemon reading the machine for itself (OWL_MACHINE left unset)."""
    d = OwlDaemon(home, config, manual=False, env=dict(env))
    d.env.pop("OWL_MACHINE", None)
    return d


def tree_pids(d: OwlDaemon, n: int) -> list[int]:
    """The pids of the agent and its setsid child, once both are recorded."""
    return wait_for(
        lambda: len(d.alive_agent_pids()) >= n and d.alive_agent_pids(), what=f"{n} agent processes"
    )


def all_in(pids: list[int], want: str) -> bool:
    states = process_states(pids)
    return all(s == want for s in states.values())


def none_in(pids: list[int], state: str) -> bool:
    states = process_states(pids)
    return all(s not in (state, "gone") for s in states.values())


def move(env: dict, x: int = 300, y: int = 300) -> None:
    xdotool(env, "mousemove", str(x), str(y))


@contextlib.contextmanager
def x_killed(env: DisplayEnv) -> Iterator[None]:
    """Kill the X server and keep its display number from being reused meanwhile.

    A killed Xvfb leaves its lock file; pointing it at this (live) process
    makes a new X server, e.g. another test's, pick another number, so the
    daemon cannot find "its" display back."""
    number = env.display.lstrip(":")
    lock = Path(f"/tmp/.X{number}-lock")
    tmp = lock.with_name(lock.name + ".owl-test")
    tmp.write_text(f"{os.getpid():10d}\n")
    os.replace(tmp, lock)
    env.kill_x()
    # An X server looking for a free number binds the display's abstract socket
    # first and may take a number whose lock names a live process all the same
    # (seen: another test's server on this display 5 s later): the socket is
    # held here, and whoever connects to it is hung up on, as to no server.
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    held.bind(f"\0/tmp/.X11-unix/X{number}")
    held.listen(16)
    done = threading.Event()

    def hang_up() -> None:
        held.settimeout(0.2)
        while not done.is_set():
            with contextlib.suppress(OSError):
                held.accept()[0].close()

    t = threading.Thread(target=hang_up, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join(2)
        held.close()
        with contextlib.suppress(OSError):
            if lock.read_text().strip() == str(os.getpid()):
                lock.unlink()


# ------------------------------------------------------------------ tests


def test_no_run_while_in_use_and_one_starts_a_second_after_input_stops(
    tmp_path: Path, xenv: DisplayEnv, project: Path
) -> None:
    with real_daemon(tmp_path / "home", xenv) as d:
        assert "pynput-x11" in d.status()["machine"]["detectors"]
        with Person(xenv) as person:
            job = d.add("sleep=30", project)
            end = time.monotonic() + 3.0
            while time.monotonic() < end:
                st = d.status()
                assert st["runs"] == [], f"a Run started while the machine was in use: {st}"
                assert st["machine"]["reason"] == "in use"
                assert st["machine"]["idle"] is False
                time.sleep(0.1)
            # there all along: never still for idle.after (the test's premise)
            assert person.moves >= 6 and person.longest_gap() < 1.0, person.longest_gap()
        stopped = person.last
        d.wait_run(job, "running", timeout=10)
        started = time.monotonic()
        # The first status that shows it is at most one CLI call late.
        assert 0.8 <= started - stopped <= 3.0, started - stopped
        st = d.status()
        assert st["machine"]["idle"] is True and st["machine"]["idle_for_s"] >= 1.0


@pytest.mark.isolated  # times the freeze: alone, after the parallel run
@pytest.mark.parametrize("sandbox", ["off", "required"])
def test_input_freezes_the_whole_tree_and_quiet_thaws_the_same_run(
    tmp_path: Path, xenv: DisplayEnv, project: Path, sandbox: str
) -> None:
    """Uncontained, and in its sandbox (its own PID namespace): the same tree frozen and thawed."""
    if sandbox != "off":
        programs("bwrap")
    cfg = {"interruption": {"grace_window": "20s"}, "sandbox": {"mode": sandbox}}
    with real_daemon(tmp_path / "home", xenv, cfg) as d:
        job = d.add("setsid-child=60 tick=0.2 sleep=60", project)
        run = d.wait_run(job, "running", timeout=10)
        assert (run.get("contained") or "").startswith("contained: bwrap") == (sandbox != "off")
        pids = tree_pids(d, 2)
        assert none_in(pids, STOPPED)

        sent = time.monotonic()
        move(xenv, 10, 10)
        wait_for(
            lambda: all_in(pids, STOPPED),
            timeout=5,
            interval=0.005,
            what="every process of the Run to be stopped",
        )
        froze = time.monotonic() - sent
        assert froze < 1.0, f"freeze took {froze:.3f}s"
        frozen = d.wait_run(job, "frozen", timeout=5)
        assert frozen["id"] == run["id"] and frozen["frozen_by"] == "machine"
        assert 0 < frozen["grace_left_s"] <= 20

        # A second of quiet: the same Run goes on.
        wait_for(
            lambda: none_in(pids, STOPPED),
            timeout=5,
            interval=0.02,
            what="the Run's processes to run again",
        )
        thawed = time.monotonic() - sent
        assert 0.8 <= thawed <= 3.0, f"thawed {thawed:.2f}s after the input"
        again = d.wait_run(job, "running", timeout=5)
        assert again["id"] == run["id"]
        assert all(s != "gone" for s in process_states(pids).values())
        assert [r["id"] for r in d.status()["runs"]] == [run["id"]]


def make_supply(root: Path, *, discharging: bool) -> Path:
    """A folder laid out like /sys/class/power_supply: one battery, one charger."""
    bat, ac = root / "BAT0", root / "AC"
    bat.mkdir(parents=True, exist_ok=True)
    ac.mkdir(parents=True, exist_ok=True)
    for name, value in {
        "type": "Battery",
        "capacity": "80",
        "energy_now": "40000000",
        "energy_full": "50000000",
        "power_now": "10000000",
    }.items():
        (bat / name).write_text(value + "\n")
    (ac / "type").write_text("Mains\n")
    set_power(root, discharging=discharging)
    return root


def set_power(root: Path, *, discharging: bool) -> None:
    """Unplug (discharging) or plug in the fake charger."""
    (root / "BAT0" / "status").write_text("Discharging\n" if discharging else "Charging\n")
    (root / "AC" / "online").write_text("0\n" if discharging else "1\n")


@pytest.mark.isolated  # times the freeze: alone, after the parallel run
def test_battery_keeps_a_job_waiting_freezes_a_run_and_mains_thaws_it(
    tmp_path: Path, xenv: DisplayEnv, project: Path
) -> None:
    supply = make_supply(tmp_path / "power", discharging=True)
    env = dict(xenv, OWL_POWER_SUPPLY_PATH=str(supply))
    with real_daemon(tmp_path / "home", env, {"interruption": {"grace_window": "20s"}}) as d:
        job = d.add("setsid-child=60 tick=0.2 sleep=60", project)
        # Quiet for well over idle.after, but on battery: the Job waits and says why.
        st = wait_for(
            lambda: (s := d.status())["machine"]["idle_for_s"] >= 1.5 and s,
            what="the machine to be quiet",
        )
        assert st["runs"] == []
        assert st["machine"]["on_ac_power"] is False
        assert st["machine"]["reason"] == "on battery"
        assert st["waiting"] == "on battery"
        assert "on battery" in d.ok("status")
        assert d.job(job)["state"] == "pending"

        plugged = time.monotonic()
        set_power(supply, discharging=False)
        run = d.wait_run(job, "running", timeout=10)
        started = time.monotonic() - plugged
        pids = tree_pids(d, 2)

        unplugged = time.monotonic()
        set_power(supply, discharging=True)
        wait_for(
            lambda: all_in(pids, STOPPED),
            timeout=5,
            interval=0.01,
            what="the Run to freeze on battery",
        )
        froze = time.monotonic() - unplugged
        frozen = d.wait_run(job, "frozen", timeout=5)
        assert frozen["id"] == run["id"]
        st = d.status()
        assert st["machine"]["reason"] == "on battery" and st["machine"]["idle"] is False
        assert 0 < frozen["grace_left_s"] <= 20

        set_power(supply, discharging=False)
        wait_for(
            lambda: none_in(pids, STOPPED),
            timeout=5,
            interval=0.02,
            what="the Run to thaw on mains",
        )
        again = d.wait_run(job, "running", timeout=5)
        assert again["id"] == run["id"] and d.status()["machine"]["on_ac_power"] is True
        print(f"start after plugging in {started:.2f}s, freeze after unplugging {froze:.2f}s")
        # Seen while a Run is live: the engine looks at the charger every second.
        assert froze < 2.5


def test_no_display_nothing_starts_on_its_own_but_owl_start_works(
    tmp_path: Path, project: Path
) -> None:
    env = dict(os.environ)
    for key in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "DBUS_SESSION_BUS_ADDRESS"):
        env.pop(key, None)
    with real_daemon(tmp_path / "home", env) as d:
        job = d.add("sleep=30", project)
        st = d.status()
        assert st["machine"]["reason"] == "input cannot be read: no DISPLAY"
        assert st["machine"]["idle"] is False and st["machine"]["idle_for_s"] is None
        assert "no DISPLAY" in (st["waiting"] or "")
        # Longer than idle.after and than one retry of the readers: still nothing.
        time.sleep(1.5)
        st = d.status()
        assert st["runs"] == [] and d.job(job)["state"] == "pending"
        assert "input cannot be read: no DISPLAY" in d.ok("status")
        assert d.proc.poll() is None

        d.ok("start")
        run = d.wait_run(job, "running", timeout=10)
        assert run["frozen_by"] is None
        # Started by hand, it is not frozen for the machine being unreadable.
        time.sleep(1.2)
        st = d.status()
        assert [(r["id"], r["state"]) for r in st["runs"]] == [(run["id"], "running")]
        assert none_in(d.alive_agent_pids(), STOPPED)
        assert d.proc.poll() is None


def test_x_server_killed_mid_run_daemon_keeps_going_and_says_why(
    tmp_path: Path, xenv: DisplayEnv, project: Path
) -> None:
    with real_daemon(tmp_path / "home", xenv, {"interruption": {"grace_window": "20s"}}) as d:
        job = d.add("setsid-child=60 sleep=60", project)
        run = d.wait_run(job, "running", timeout=10)
        pids = tree_pids(d, 2)

        with x_killed(xenv):
            st = wait_for(
                lambda: (s := d.status())["machine"]["problem"] and s,
                timeout=10,
                what="status to say the machine cannot be read",
            )
            assert st["machine"]["reason"].startswith("input cannot be read: ")
            assert st["attention"].startswith("the machine cannot be read: ")
            # A machine that cannot be read is not idle: the same Run is frozen.
            wait_for(lambda: all_in(pids, STOPPED), timeout=5, what="the Run to freeze")
            assert d.wait_run(job, "frozen", timeout=5)["id"] == run["id"]

            # The loss is logged when it happens (hooks, then the reader), and only
            # then: past a retry of the readers (every 5 s) the daemon has said no more.
            def idle_lines() -> list[str]:
                return [ln for ln in d.log_text().splitlines() if " owl.idle " in ln]

            said = idle_lines()
            assert len([ln for ln in said if "input hooks stopped: X server went away" in ln]) == 1
            assert len([ln for ln in said if "xscreensaver failed" in ln]) == 1, said
            time.sleep(5.5)
            assert d.proc.poll() is None
            assert d.status()["machine"]["problem"]
            assert idle_lines() == said


def test_idle_after_edited_in_config_applies_without_restart(
    tmp_path: Path, xenv: DisplayEnv, project: Path
) -> None:
    cfg = {"idle": {"after": "1h", "require_ac_power": True}}
    with real_daemon(tmp_path / "home", xenv, cfg) as d:
        move(xenv)
        job = d.add("sleep=30", project)
        time.sleep(1.5)
        st = d.status()
        assert st["runs"] == [] and st["machine"]["reason"] == "in use"
        assert st["machine"]["idle_in_s"] > 3000

        import tomllib

        text = tomllib.loads((d.home / "config.toml").read_text())
        text["idle"]["after"] = "2s"
        d.write_config(text)
        edited = time.monotonic()
        st = wait_for(
            lambda: (
                (s := d.status())["machine"]["idle_in_s"] is None
                or s["machine"]["idle_in_s"] < 3
                and s
            ),
            timeout=10,
            what="the new idle.after to be used",
        )
        d.wait_run(job, "running", timeout=10)
        print(f"Run started {time.monotonic() - edited:.2f}s after the edit")


def test_a_locked_screen_starts_runs_after_a_few_quiet_seconds_and_input_still_freezes(
    tmp_path: Path, xenv: DisplayEnv, project: Path
) -> None:
    # idle.after is an hour: only the lock (heard on a session bus of the
    # test's, from a stand-in screensaver) can let the Run start this soon.
    with Desktop() as desk:
        env = dict(xenv, DBUS_SESSION_BUS_ADDRESS=desk.address)
        with real_daemon(tmp_path / "home", env, {"idle": {"after": "1h"}}) as d:
            job = d.add("sleep=60", project)
            wait_for(lambda: d.status()["machine"]["lock_sources"], what="the lock's first read")
            move(xenv, 20, 20)
            moved = time.monotonic()
            desk.lock()
            wait_for(lambda: d.status()["machine"]["screen_locked"], what="the lock heard")
            assert d.status()["runs"] == []
            d.wait_run(job, "running", timeout=LOCKED_AFTER + 10)
            waited = time.monotonic() - moved
            assert LOCKED_AFTER - 0.5 <= waited <= LOCKED_AFTER + 6, waited  # not before
            sent = time.monotonic()
            move(xenv, 40, 40)  # a hand on the mouse at the lock screen
            d.wait_run(job, "frozen", timeout=5)
            assert time.monotonic() - sent < 2.0
