"""The tray over the REAL daemon, end to end, on a virtual desktop.

`owl tray` runs as a subprocess (daemon and tray in one process) with real
idle detection (pynput hooks and XScreenSaver on Xvfb, not the manual
machine), a tray host (trayer) and a notification daemon (dunst). Input comes
from xdotool, so a "person" touching the mouse reaches the same hooks a
real one would. Jobs are run by the scriptable agent of tests/agents/agent.py.

The icon is checked on screen, in every state, as real Runs pass through
them; the menu is opened with a click and driven with the keyboard. Also
here: `owl` with no display at all, or with a display but no tray, runs the
daemon headless and says why in one line.

Screenshots go to test-artifacts/tray/ (daemon-*.png).
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any, Callable

import pytest

from display import DisplayEnv, display_fixture, virtual_display, xdotool
from owlproc import OwlDaemon, make_project, process_states, wait_for
from support.person import Person
from traydesk import (
    ARTIFACTS,
    STATE_COLOURS,
    colour_share,
    find_tray_icon_geometry,
    icon_text,
    keyboard_grabbed,
    menu_keys,
    open_menu,
    screenshot,
)

pytestmark = [pytest.mark.display, pytest.mark.timeout(180)]

#: The agent of the first Job: ignores SIGTERM, prints every second, and
#: would run for ten minutes; only Owl's SIGKILL ends it early. The agent
#: skips words that are not steps, so the Job reads like one in the menu.
STUBBORN = "Make the login test pass on CI again trap-term tick=1 sleep=600"


class OwlTray(OwlDaemon):
    """`owl tray` (or bare `owl`) instead of `owl daemon`, reading the machine itself."""

    def __init__(
        self,
        home: Path,
        env: dict[str, str],
        config: dict | None = None,
        argv: tuple[str, ...] = ("tray",),
    ) -> None:
        super().__init__(home, config, manual=False, env=dict(env))
        self.env.pop("OWL_MACHINE", None)
        # Start at login is read for the menu's check mark: keep it in tmp.
        self.env["XDG_CONFIG_HOME"] = str(self.home / "xdg-config")
        self.argv = argv

    def edit_config(self, section: str, **values: Any) -> None:
        cfg = tomllib.loads((self.home / "config.toml").read_text())
        cfg.setdefault(section, {}).update(values)
        self.write_config(cfg)

    def owl_lines(self) -> list[str]:
        """What Owl itself said on stderr (log lines carry a timestamp instead)."""
        return [line for line in self.log_text().splitlines() if line.startswith("owl:")]


# ------------------------------------------------------------------ helpers


def shows(env: dict, check: Callable[[str], bool], what: str, timeout: float = 15.0) -> str:
    """Wait until the icon's hover text passes `check`; the tray sets it last,
    after the icon and the menu."""
    return wait_for(
        lambda: (t := icon_text(env)) and check(t) and t,
        timeout,
        what=f"the tray to show {what} (it shows {icon_text(env)!r})",
    )


def shoot_icon(env: dict, state: str) -> Path:
    """A screenshot of the docked icon, once its pixels are mostly `state`'s colour.

    Waiting for the colour (rather than taking one shot) lets the X server
    finish painting; the assertion is that it gets there, and that no other
    state's colour is as common.
    """
    geometry = find_tray_icon_geometry(env)
    path = ARTIFACTS / f"daemon-icon-{state}.png"

    def painted() -> bool:
        screenshot(env, path, geometry, scale=8)
        return colour_share(path, STATE_COLOURS[state]) > 0.10

    wait_for(painted, 5.0, interval=0.2, what=f"the {state} owl on screen")
    share = colour_share(path, STATE_COLOURS[state])
    others = {
        k: colour_share(path, c)
        for k, c in STATE_COLOURS.items()
        if k != state and {k, state} != {"idle", "frozen"}
    }
    assert max(others.values()) < share, f"{state} looks like another state: {others}"
    return path


def shoot_menu(env: dict, menu: tuple[int, int, int, int], name: str) -> Path:
    """The open menu with the tray icon above it (what the README shows)."""
    ix, iy, iw, ih = find_tray_icon_geometry(env)
    mx, my, mw, mh = menu
    x0, y0 = max(0, min(ix, mx) - 8), max(0, min(iy, my) - 1)
    x1, y1 = max(ix + iw, mx + mw) + 8, max(iy + ih, my + mh) + 8
    return screenshot(env, ARTIFACTS / f"daemon-menu-{name}.png", (x0, y0, x1 - x0, y1 - y0))


def press(env: dict, keys: list[str]) -> None:
    for key in keys:
        xdotool(env, "key", key)
    wait_for(lambda: not keyboard_grabbed(env), what="the menu to close")


def frozen(pids: list[int]) -> bool:
    return all(s == "stopped" for s in process_states(pids).values())


def thawed(pids: list[int]) -> bool:
    return all(s not in ("stopped", "gone") for s in process_states(pids).values())


desk = display_fixture(scope="module", tray=True, notify=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


# -------------------------------------------------------------------- tests


def test_the_icon_follows_real_runs_and_the_menu_pauses_and_resumes(
    desk: DisplayEnv, tmp_path: Path, project: Path
) -> None:
    shots: dict[str, Path] = {}
    with OwlTray(tmp_path / "home", desk, {"interruption": {"grace_window": "60s"}}) as d:
        # Nothing to do: asleep.
        shows(desk, lambda t: t == "Owl: Nothing to do", "nothing to do")
        shots["idle"] = shoot_icon(desk, "idle")

        with Person(desk, xs=(200, 240), y=400):
            # Someone is at the machine: the Job waits.
            job = d.add(STUBBORN, project)
            shows(desk, lambda t: t.startswith(("Owl: Idle in", "Owl: Waiting")), "a Job waiting")
            shots["waiting"] = shoot_icon(desk, "waiting")
            st = d.status()
            assert st["runs"] == [] and st["machine"]["reason"] == "in use", st

        # They leave: a second later the Run starts.
        run = d.wait_run(job, "running", timeout=10)
        pids = wait_for(lambda: d.alive_agent_pids(), what="the agent's pid")
        shows(desk, lambda t: t.startswith(f"Owl: Working on job {job}"), "the Run working")
        shots["working"] = shoot_icon(desk, "working")

        # They come back: every process stops, the ring starts to drain.
        with Person(desk, xs=(200, 240), y=400):
            r = d.wait_run(job, "frozen", timeout=5)
            assert r["frozen_by"] == "machine" and r["id"] == run["id"]
            wait_for(lambda: frozen(pids), 5, what="the agent stopped")
            shows(
                desk,
                lambda t: t.startswith("Owl: Frozen · ") and t.endswith(" left"),
                "the grace countdown",
            )
            shots["frozen"] = shoot_icon(desk, "frozen")
        # They leave again within the window: the same Run goes on.
        r = d.wait_run(job, "running", timeout=10)
        assert r["id"] == run["id"]
        wait_for(lambda: thawed(pids), 5, what="the agent running again")
        shows(desk, lambda t: t.startswith("Owl: Working on"), "the Run working again")

        # Menu → Pause, by keyboard. The click is input too (the machine
        # freezes the Run at once); Pause makes it the user's freeze.
        keys = menu_keys(d.status(), ["Pause"])
        shoot_menu(desk, open_menu(desk), "working")
        press(desk, keys)
        r = wait_for(
            lambda: (r := d.run_of(job)) and r["frozen_by"] == "user" and r,
            10,
            what="the Run frozen by the user",
        )
        assert r["state"] == "frozen" and r["id"] == run["id"] and d.status()["paused"] is True
        assert frozen(pids)
        shows(desk, lambda t: t == "Owl: Paused", "paused")
        shots["paused"] = shoot_icon(desk, "paused")
        time.sleep(1.5)  # well past idle.after: a paused Run stays frozen though idle
        assert d.run_of(job)["frozen_by"] == "user" and frozen(pids)

        # Menu → Resume: it thaws once the machine is idle again.
        keys = menu_keys(d.status(), ["Resume"])
        shoot_menu(desk, open_menu(desk), "paused")
        press(desk, keys)
        r = d.wait_run(job, "running", timeout=10)
        assert r["frozen_by"] is None and r["id"] == run["id"] and d.status()["paused"] is False
        wait_for(lambda: thawed(pids), 5, what="the agent running again")
        shows(desk, lambda t: t.startswith("Owl: Working on"), "the Run working again")

        # A short grace window, and the person stays: TERM (ignored), then KILL.
        d.edit_config("interruption", grace_window="1s")
        wait_for(
            lambda: (r := d.run_of(job)) and r["grace_window_s"] == 1.0,
            10,
            what="the new grace window in force",
        )
        with Person(desk, xs=(200, 240), y=400):
            text = shows(desk, lambda t: "killed" in t, "the killed Run", timeout=20)
            assert text.splitlines()[1] == f"job {job}'s agent was killed", text
            shots["attention"] = shoot_icon(desk, "attention")
            wait_for(lambda: not d.alive_agent_pids(), 5, what="the agent gone")
            last = d.job(job)["runs"][-1]
            assert (last["id"], last["outcome"], last["ended_by"]) == (
                run["id"],
                "interrupted",
                "sigkill",
            )
            # Still in use, so the Job waits for its next attempt; Quit by SIGTERM.
            assert d.stop(10) == 0
    assert "Traceback" not in d.log_text(), d.log_text()

    # Six states, six different pictures.
    from PIL import Image

    pixels = {name: Image.open(path).convert("RGB").tobytes() for name, path in shots.items()}
    assert len(set(pixels.values())) == len(pixels) == 6, sorted(pixels)


def test_owl_without_a_display_runs_headless_and_says_why(tmp_path: Path) -> None:
    d = OwlTray(tmp_path / "home", {}, argv=())  # bare `owl`
    for key in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "PYSTRAY_BACKEND"):
        d.env.pop(key, None)
    with d:
        st = d.status()
        assert st["machine"]["problem"], st  # no display: input cannot be read
        said = wait_for(d.owl_lines, 5, what="owl to say why there is no tray")
        assert len(said) == 1 and "no tray" in said[0] and "no display" in said[0], said
        assert d.stop(10) == 0
    assert d.owl_lines() == said


def test_owl_with_a_display_but_no_tray_host_runs_headless(tmp_path: Path) -> None:
    with virtual_display(tray=False, notify=False) as env:
        d = OwlTray(tmp_path / "home", env)
        with d:
            # Owl waits a while for a panel that may start after it, then gives up.
            said = wait_for(d.owl_lines, 15, what="owl to give up on a tray")
            assert len(said) == 1 and "no system tray" in said[0], said
            assert d.status()["machine"]["detectors"], "the daemon should still read the machine"
            assert d.stop(10) == 0
        assert d.owl_lines() == said
