"""One daemon, any number of views: plain `owl` joins the daemon already running.

The real daemon runs in the background (as `owl add` leaves it); `owl` then
shows the tray as a client over the socket, on a virtual desktop (Xvfb,
trayer, dunst). Its menu follows the daemon at once (an event, not a poll);
Quit closes the tray only, and `owl daemon stop` stops the daemon, which
closes the joined tray too.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from display import DisplayEnv, display_fixture, xdotool
from owlproc import OWL, OwlDaemon, make_project, wait_for
from traydesk import find_tray_icon, icon_text, keyboard_grabbed, menu_keys, open_menu

pytestmark = [pytest.mark.display, pytest.mark.timeout(120)]

desk = display_fixture(scope="module", tray=True, notify=True)


def joined_tray(d: OwlDaemon, log: Path) -> subprocess.Popen:
    """Plain `owl`, in the daemon's home, on the desktop."""
    env = dict(d.env, XDG_CONFIG_HOME=str(d.home / "xdg-config"))
    return subprocess.Popen(
        [*OWL], env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"), stdin=subprocess.DEVNULL
    )


def pick(env: dict, keys: list[str]) -> None:
    """Open the menu at once and press `keys` in it."""
    open_menu(env)
    for key in keys:
        xdotool(env, "key", key)
    wait_for(lambda: not keyboard_grabbed(env), what="the menu to close")


def hover(env: dict, want: str | tuple[str, ...], timeout: float = 10.0) -> float:
    """Seconds until the icon's hover text starts with `want`."""
    t0 = time.monotonic()
    wait_for(
        lambda: icon_text(env).startswith(want),
        timeout,
        interval=0.01,
        what=f"the tray to say {want!r} (it says {icon_text(env)!r})",
    )
    return time.monotonic() - t0


def test_plain_owl_joins_the_running_daemon_and_quits_alone(
    desk: DisplayEnv, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "project")
    with OwlDaemon(tmp_path / "home", env=dict(desk)) as d:
        pid = d.json("daemon", "status", "--json")["pid"]
        log = tmp_path / "tray.log"
        tray = joined_tray(d, log)
        try:
            find_tray_icon(desk)
            hover(desk, "Owl: Nothing to do")
            assert f"joining the daemon already running (pid {pid})" in log.read_text()
            # The menu follows the daemon's changes at once, not at the next poll:
            # opened as soon as the tray has heard of the `owl add` (within a
            # blink), Start is there to pick (a stale menu would have it greyed,
            # and the same keys would pick Pause).
            job = d.add("sleep=30", project)
            t0 = time.monotonic()
            wait_for(
                lambda: not icon_text(desk).startswith("Owl: Nothing to do"),
                10,
                interval=0.01,
                what="the tray to hear of the Job",
            )
            assert time.monotonic() - t0 < 1.0
            pick(desk, menu_keys(d.status(), ["Start"], owns_daemon=False))
            run = d.wait_run(job, "running")
            # and opened as soon as the tray has heard of the Run (within a
            # blink: an event, not the next poll), Stop is there, not greyed
            took = hover(desk, f"Owl: Working on job {job}")
            assert took < 1.0, took
            pick(desk, menu_keys(d.status(), ["Stop"], owns_daemon=False))
            wait_for(
                lambda: d.job(job)["runs"][0]["outcome"] == "interrupted",
                what="the Run stopped from the menu",
            )
            assert d.job(job)["runs"][0]["id"] == run["id"]
            # the hover text follows within a blink of a change too
            d.machine("idle")
            took = hover(desk, f"Owl: Working on job {job}")
            print(f"hover followed in {took * 1000:.0f} ms")
            assert took < 1.0
            # Quit closes the tray only, and says so
            keys = menu_keys(d.status(), ["Quit tray (the daemon goes on)"], owns_daemon=False)
            open_menu(desk)
            for key in keys:
                xdotool(desk, "key", key)
            assert tray.wait(15) == 0
            assert f"tray closed; the daemon (pid {pid}) goes on" in log.read_text()
            assert d.status()["runs"][0]["state"] == "running"
            assert not keyboard_grabbed(desk)
            # a second one joins again; `owl daemon stop` stops the daemon as
            # Quit in its own tray would, and the joined tray closes with it
            tray = joined_tray(d, log)
            find_tray_icon(desk)
            out = d.ok("daemon", "stop")
            assert f"the daemon (pid {pid}) stopped" in out
            assert d.proc.wait(15) == 0 and tray.wait(15) == 0
            assert d.owl("daemon", "status").returncode == 3
            assert not d.alive_agent_pids()
        finally:
            if tray.poll() is None:
                tray.kill()
                tray.wait()
