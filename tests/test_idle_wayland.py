"""Idle detection on Wayland, end to end, against real headless compositors.

GNOME's mutter (Mutter's IdleMonitor watches, input through RemoteDesktop),
KDE's kwin (ext_idle_notify_v1, and org_kde_kwin_idle when forced; input
through fake-input) and sway 1.7 (org_kde_kwin_idle; `swaymsg` and `wtype`).
The real `owl daemon` reads each with no DISPLAY at all; `idle.after` is 1 s.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from compositors import Compositor, compositor
from owlproc import OwlDaemon, make_project, process_states, wait_for

pytestmark = pytest.mark.timeout(120)


#: The detectors `owl status` names under each compositor.
def sway_idle() -> str:
    """The idle protocol Owl takes from this sway: ext-idle-notify-v1 from sway 1.8
    (Debian 13 has 1.10), kde-idle before (Debian 12's 1.7 offers only that)."""
    out = subprocess.run(["sway", "--version"], capture_output=True, text=True).stdout
    found = re.search(r"(\d+)\.(\d+)", out)
    version = (int(found[1]), int(found[2])) if found else (0, 0)
    return "ext-idle-notify-v1" if version >= (1, 8) else "kde-idle"


DETECTORS = {
    "mutter": ["mutter-watch", "mutter"],
    "kwin": ["ext-idle-notify-v1"],
    "sway": [sway_idle()] if shutil.which("sway") else [],
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def daemon_on(c: Compositor, home: Path, config: dict | None = None, **env: str) -> OwlDaemon:
    """The real daemon reading this compositor for itself: no X display, no manual machine."""
    d = OwlDaemon(home, config, manual=False, env=dict(c.env, **env))
    for key in ("OWL_MACHINE", "DISPLAY"):
        d.env.pop(key, None)
    return d


class Fidget:
    """A person at the machine: an input every `every` seconds, on a thread."""

    def __init__(self, c: Compositor, every: float = 0.25) -> None:
        self.c, self.every = c, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.last = 0.0
        self.moves = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.c.move()
            self.last = time.monotonic()
            self.moves += 1
            self._stop.wait(self.every)

    def __enter__(self) -> "Fidget":
        self._thread.start()
        wait_for(lambda: self.moves > 0, what="the first input")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def states(pids: list[int]) -> set[str]:
    return set(process_states(pids).values())


@pytest.fixture(params=["mutter", "kwin", "sway"])
def desktop(request: pytest.FixtureRequest) -> Iterator[Compositor]:
    with compositor(request.param) as c:
        yield c


@pytest.mark.isolated  # times the freeze: alone, after the parallel run
def test_input_keeps_a_job_waiting_quiet_starts_it_input_freezes_quiet_thaws_and_losing_the_compositor_freezes(
    tmp_path: Path, desktop: Compositor, project: Path
) -> None:
    c = desktop
    with daemon_on(c, tmp_path / "home", {"interruption": {"grace_window": "30s"}}) as d:
        st = d.status()
        assert st["machine"]["detectors"] == DETECTORS[c.kind], st["machine"]
        assert f"detectors: {', '.join(DETECTORS[c.kind])}" in d.ok("status")

        # A person at the machine: the Job waits, and says why.
        with Fidget(c) as person:
            job = d.add("setsid-child=60 tick=0.2 sleep=60", project)
            end = time.monotonic() + 2.5
            while time.monotonic() < end:
                st = d.status()
                assert st["runs"] == [], f"a Run started while the machine was in use: {st}"
                assert st["machine"]["reason"] == "in use"
                time.sleep(0.1)
            assert person.moves >= 4
        run = d.wait_run(job, "running", timeout=10)
        started = time.monotonic() - person.last
        assert 0.9 <= started <= 4.0, f"started {started:.2f}s after the last input"
        pids = wait_for(
            lambda: len(d.alive_agent_pids()) >= 2 and d.alive_agent_pids(),
            what="the agent and its setsid child",
        )

        # Input freezes every process of the Run, at once.
        sent = time.monotonic()
        c.move()
        wait_for(
            lambda: states(pids) == {"stopped"},
            timeout=5,
            interval=0.002,
            what="every process of the Run to be stopped",
        )
        froze = time.monotonic() - sent
        assert froze < 0.5, f"froze {froze:.3f}s after the input"
        frozen = d.wait_run(job, "frozen", timeout=5)
        assert frozen["id"] == run["id"] and frozen["frozen_by"] == "machine"

        # Quiet for idle.after: the same Run goes on.
        wait_for(
            lambda: "stopped" not in states(pids),
            timeout=6,
            interval=0.01,
            what="the Run's processes to run again",
        )
        thawed = time.monotonic() - sent
        assert 0.9 <= thawed <= 4.0, f"thawed {thawed:.2f}s after the input"
        assert d.wait_run(job, "running", timeout=5)["id"] == run["id"]

        # The compositor goes away: the machine cannot be read (not idle), the Run freezes.
        c.kill()
        st = wait_for(
            lambda: (s := d.status())["machine"]["problem"] and s,
            timeout=10,
            what="status to say the machine cannot be read",
        )
        assert st["machine"]["idle"] is False and st["machine"]["idle_for_s"] is None
        assert st["machine"]["reason"].startswith("input cannot be read: ")
        wait_for(lambda: states(pids) == {"stopped"}, timeout=5, what="the Run to freeze")
        assert d.wait_run(job, "frozen", timeout=5)["id"] == run["id"]
        assert d.proc.poll() is None
        assert d.stop() == 0, d.log_text()  # and it still shuts down cleanly
        print(
            f"{c.kind}: started {started:.2f}s after the last input, froze in "
            f"{froze * 1000:.1f} ms, thawed {thawed:.2f}s after it"
        )


def test_a_key_press_freezes_the_run_too(
    tmp_path: Path, desktop: Compositor, project: Path
) -> None:
    c = desktop
    with daemon_on(c, tmp_path / "home", {"interruption": {"grace_window": "30s"}}) as d:
        job = d.add("sleep=60", project)
        d.wait_run(job, "running", timeout=10)
        pids = wait_for(lambda: d.alive_agent_pids(), what="the agent")
        c.key()
        wait_for(
            lambda: states(pids) == {"stopped"},
            timeout=5,
            interval=0.005,
            what=f"a key typed on {c.kind} to freeze the Run",
        )


def test_kwin_offers_ext_idle_notify_and_the_kde_protocol_can_be_forced(
    tmp_path: Path, project: Path
) -> None:
    with compositor("kwin") as c:
        with daemon_on(c, tmp_path / "a", OWL_IDLE_BACKEND="kde-idle") as d:
            assert d.status()["machine"]["detectors"] == ["kde-idle"]
            job = d.add("sleep=60", project)
            d.wait_run(job, "running", timeout=10)
            pids = wait_for(lambda: d.alive_agent_pids(), what="the agent")
            c.move()
            wait_for(
                lambda: states(pids) == {"stopped"},
                timeout=5,
                interval=0.005,
                what="org_kde_kwin_idle's resumed to freeze the Run",
            )


def test_a_compositor_without_an_idle_protocol_says_what_is_missing(
    tmp_path: Path, project: Path
) -> None:
    # mutter offers no Wayland idle protocol; called by another desktop name and
    # with no session bus, nothing can read it.
    with compositor("mutter") as c:
        env = dict(c.env, XDG_CURRENT_DESKTOP="Unknown")
        d = daemon_on(c, tmp_path / "home")
        d.env.update(env)
        d.env.pop("DBUS_SESSION_BUS_ADDRESS")
        with d:
            job = d.add("sleep=30", project)
            st = d.status()
            want = (
                "input cannot be read: the Wayland compositor offers no idle protocol "
                "(neither ext_idle_notifier_v1 nor org_kde_kwin_idle), and no session "
                "D-Bus for GNOME's idle monitor"
            )
            assert st["machine"]["reason"] == want
            assert want in d.ok("status")
            time.sleep(1.5)  # longer than idle.after: still nothing starts
            assert d.status()["runs"] == [] and d.job(job)["state"] == "pending"
            assert d.stop() == 0, d.log_text()

        # On its bus, under another name, Mutter is found all the same.
        with daemon_on(c, tmp_path / "home2", XDG_CURRENT_DESKTOP="Unknown") as d:
            assert d.status()["machine"]["detectors"] == ["mutter-watch", "mutter"]


def test_an_unknown_forced_backend_is_named(tmp_path: Path) -> None:
    with compositor("sway") as c, daemon_on(c, tmp_path / "home", OWL_IDLE_BACKEND="kwin") as d:
        reason = d.status()["machine"]["reason"]
        assert reason.startswith(
            "input cannot be read: OWL_IDLE_BACKEND=kwin is not one of: "
            "mutter, ext-idle-notify, kde-idle"
        ), reason


@pytest.mark.parametrize("kind", ["mutter", "kwin"])
def test_idle_after_edited_in_config_rearms_the_compositor_watch(
    kind: str, tmp_path: Path, project: Path
) -> None:
    import tomllib

    with compositor(kind) as c, daemon_on(c, tmp_path / "home", {"idle": {"after": "1h"}}) as d:
        c.move()
        job = d.add("sleep=30", project)
        time.sleep(1.5)
        st = d.status()
        assert st["runs"] == [] and st["machine"]["reason"] == "in use"
        assert st["machine"]["idle_in_s"] > 3000
        cfg = tomllib.loads((d.home / "config.toml").read_text())
        cfg["idle"]["after"] = "1s"
        d.write_config(cfg)
        d.wait_run(job, "running", timeout=10)
        # The watch now fires at 1 s: input freezes and a second of quiet thaws.
        pids = wait_for(lambda: d.alive_agent_pids(), what="the agent")
        c.move()
        wait_for(
            lambda: states(pids) == {"stopped"}, timeout=5, interval=0.005, what="the Run to freeze"
        )
        wait_for(
            lambda: "stopped" not in states(pids),
            timeout=6,
            interval=0.01,
            what="a second of quiet to thaw it",
        )


class Events:
    """Callbacks that record what a backend said, and when."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def input(self, *_: object) -> None:
        self.seen.append("input")

    def quiet(self) -> None:
        self.seen.append("quiet")

    def dead(self, why: str) -> None:
        self.seen.append(f"dead: {why}")

    def count(self, what: str) -> int:
        return sum(1 for s in self.seen if s.startswith(what))


@pytest.mark.parametrize("kind", ["mutter", "kwin", "sway"])
def test_the_backend_says_input_and_quiet_rearms_for_a_new_after_and_notices_the_end(
    kind: str,
) -> None:
    from owl.idle.mutter_watch import MutterWatch
    from owl.idle.wayland import WaylandIdle

    with compositor(kind) as c:
        ev = Events()
        backend = (
            MutterWatch(bus=c.env["DBUS_SESSION_BUS_ADDRESS"])
            if kind == "mutter"
            else WaylandIdle(c.env["WAYLAND_DISPLAY"])
        )
        backend.watch_quiet(3600.0, ev.quiet)
        backend.start(ev.input, ev.dead)
        try:
            assert backend.alive
            c.move()
            if kind == "mutter":  # armed at start: the first input is said at once
                wait_for(lambda: ev.count("input") == 1, timeout=5, what="the input")
            backend.watch_quiet(1.0, ev.quiet)  # idle.after edited to 1 s
            wait_for(lambda: ev.count("quiet") == 1, timeout=5, what="quiet after 1 s")
            assert ev.count("quiet") == 1
            if kind != "mutter":
                assert backend.idle_seconds() >= 1.0  # type: ignore[attr-defined]
            before = ev.count("input")
            c.move()
            wait_for(lambda: ev.count("input") > before, timeout=5, what="the next input")
            if kind != "mutter":
                assert backend.idle_seconds() == 0.0  # type: ignore[attr-defined]
            c.kill()
            wait_for(lambda: ev.count("dead"), timeout=5, what="the end to be noticed")
            assert not backend.alive
        finally:
            backend.stop()


def test_input_between_an_edited_after_and_its_first_quiet_is_still_said() -> None:
    """The engine may start a Run the moment `idle.after` shrinks (its own
    GetIdletime read says the machine is already idle that long), before
    Mutter's new idle watch fires: input from then on must still be said."""
    from owl.idle.mutter import MutterReader
    from owl.idle.mutter_watch import MutterWatch

    with compositor("mutter") as c:
        ev = Events()
        reader = MutterReader(bus=c.env["DBUS_SESSION_BUS_ADDRESS"])
        reader.open()
        backend = MutterWatch(bus=c.env["DBUS_SESSION_BUS_ADDRESS"])
        backend.watch_quiet(3600.0, ev.quiet)
        backend.start(ev.input, ev.dead)
        try:
            c.move()
            wait_for(lambda: ev.count("input") == 1, timeout=5, what="the first input")
            # The one-shot input watch has fired; it is armed again on quiet,
            # or when idle.after changes. Input now is Mutter's alone to know:
            wait_for(lambda: reader.idle_seconds() > 0.3, timeout=5, what="a little quiet")
            c.move()
            wait_for(lambda: reader.idle_seconds() < 0.3, timeout=5, what="Mutter to see it")
            backend.watch_quiet(1.0, ev.quiet)  # edited: a Run may start on it now
            wait_for(lambda: ev.count("input") == 2, timeout=5, what="the input to be said")
        finally:
            backend.stop()
            reader.close()


def test_a_hung_compositor_is_named_within_seconds_not_waited_for() -> None:
    import os
    import signal

    from owl.idle import choose

    with compositor("sway") as c:
        os.kill(c.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            plan = choose("linux", c.env)
            took = time.monotonic() - started
        finally:
            os.kill(c.proc.pid, signal.SIGCONT)
        assert took < 5.0
        assert plan.limit is not None and plan.limit.startswith(
            "the Wayland compositor did not answer within 2 s"
        ), plan.limit
        found = choose("linux", c.env)  # answering again: found
        try:
            assert found.hooks is not None and found.hooks.name == sway_idle()
        finally:
            found.hooks.stop()  # type: ignore[union-attr]  # let go of the connection
