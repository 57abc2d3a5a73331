"""The tray on a real (virtual) desktop: Xvfb, trayer, dunst, xdotool.

The tray runs in its own process over a stand-in daemon (`FakeDaemon`, at
the bottom of this file, run as a script): its status document is a JSON
file the test rewrites, and every verb the menu asks for is appended to a
calls file. The helpers — `find_tray_icon_geometry`, `screenshot`,
`open_menu`, `choose` — only need the desktop's environment, so the same
steps drive a tray over the real daemon.

Screenshots go to test-artifacts/tray/.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from display import DisplayEnv, virtual_display, xdotool

pytestmark = pytest.mark.display

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "tray"
TIMEOUT = 10.0

# ------------------------------------------------------------ status documents

BASE: dict[str, Any] = {
    "version": "0.1.0",
    "machine": {"idle": False, "idle_for_s": 12.0, "on_ac_power": True, "reason": "in use",
                "idle_in_s": 588.0, "detectors": ["xscreensaver"], "problem": None},
    "paused": False, "shift": None,
    "awake": {"held": False, "backend": "none", "problem": None},
    "runs": [], "queue": [], "waiting": None, "recent": [], "review": [],
    "attention": None, "config_problem": None,
}


def doc(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d.update(changes)
    return d


def job(id: int, position: int, state: str = "pending", title: str = "Write the docs",
        worktree: str | None = None) -> dict[str, Any]:
    return {"id": id, "position": position, "state": state, "title": title,
            "project": "/src/app", "worktree": worktree}


def run(job_id: int = 12, state: str = "running", **extra: Any) -> dict[str, Any]:
    r = {"id": 7, "job_id": job_id, "title": "Fix the flaky test", "state": state,
         "frozen_by": None, "grace_left_s": None, "running_for_s": 250.0, "pids": [4242]}
    r.update(extra)
    return r


IDLE = doc()
WAITING = doc(queue=[job(13, 1)])
WORKING = doc(runs=[run()], queue=[job(12, 1, "active", "Fix the flaky test"), job(13, 2)])
FROZEN = doc(runs=[run(state="frozen", frozen_by="machine", grace_left_s=822.0)],
             queue=[job(12, 1, "active", "Fix the flaky test")])
PAUSED = doc(paused=True, queue=[job(13, 1)])
ATTENTION = doc(attention="Run 6 of job 11 was killed",
                recent=[{"run_id": 6, "job_id": 11, "title": "Bump the deps", "outcome": "interrupted",
                         "ended_by": "sigkill", "reason": "did not stop within 5 s",
                         "ended_at": "2026-01-01T10:00:00Z", "log": "/dev/null"}])

# Body colours of the owl per state (owl.tray.art), as drawn on screen.
STATE_COLOURS = {
    "idle": (138, 148, 166), "waiting": (74, 144, 226), "working": (52, 178, 89),
    "frozen": (140, 215, 250), "paused": (242, 166, 35), "attention": (230, 60, 50),
}

# ------------------------------------------------------------------ helpers


def wait_for(check: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Poll until `check()` is truthy and return it; fail naming `what`."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.2)


def _x(env: dict, *args: str) -> str:
    out = subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=10)
    return out.stdout.strip() if out.returncode == 0 else ""


def _owl_windows(env: dict) -> list[tuple[str, tuple[int, int, int, int]]]:
    found = []
    for wid in _x(env, "search", "--onlyvisible", "--classname", "^owl$").split():
        geo = _x(env, "getwindowgeometry", "--shell", wid)
        if not geo:
            continue
        g = dict(line.split("=", 1) for line in geo.splitlines() if "=" in line)
        found.append((wid, (int(g["X"]), int(g["Y"]), int(g["WIDTH"]), int(g["HEIGHT"]))))
    return found


def find_tray_icon(env: dict) -> tuple[str, tuple[int, int, int, int]]:
    """(window id, (x, y, w, h)) of Owl's icon docked in the tray."""
    def docked() -> Any:
        icons = [w for w in _owl_windows(env) if w[1][2] <= 64 and w[1][3] <= 64 and w[1][2] > 1]
        return icons[0] if icons else None
    return wait_for(docked, "Owl's icon in the tray")


def find_tray_icon_geometry(env: dict) -> tuple[int, int, int, int]:
    return find_tray_icon(env)[1]


def icon_text(env: dict) -> str:
    """The icon window's name: pystray's gtk backend sets it to the title."""
    return _x(env, "getwindowname", find_tray_icon(env)[0])


def screenshot(env: dict, path: Path, crop: tuple[int, int, int, int] | None = None,
               scale: int = 1) -> Path:
    """The whole screen (or a crop of it) as a PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    args = ["import", "-window", "root"]
    if crop:
        x, y, w, h = crop
        args += ["-crop", f"{w}x{h}+{x}+{y}", "+repage"]
    if scale != 1:
        args += ["-filter", "point", "-resize", f"{scale * 100}%"]
    subprocess.run(args + [str(path)], env=env, check=True, timeout=20)
    return path


def open_menu(env: dict, button: int = 3) -> tuple[int, int, int, int]:
    """Click the icon and return the geometry of the menu that pops up."""
    x, y, w, h = find_tray_icon_geometry(env)
    xdotool(env, "mousemove", str(x + w // 2), str(y + h // 2), "click", str(button))

    def menu() -> Any:
        big = [g for _, g in _owl_windows(env) if g[2] > 64]
        return big[0] if big else None
    geometry = wait_for(menu, "the menu to open")
    # A menu is mapped a moment before it takes the keyboard; keys sent in
    # between are lost.
    wait_for(lambda: keyboard_grabbed(env), "the menu to take the keyboard")
    return geometry


def keyboard_grabbed(env: dict) -> bool:
    """True while another client (an open menu) holds the keyboard grab."""
    from Xlib import X, display as xdisplay

    d = xdisplay.Display(env["DISPLAY"])
    try:
        status = d.screen().root.grab_keyboard(False, X.GrabModeAsync, X.GrabModeAsync, X.CurrentTime)
        if status == X.GrabSuccess:
            d.ungrab_keyboard(X.CurrentTime)
            d.sync()
        return status == X.AlreadyGrabbed
    finally:
        d.close()


def close_menus(env: dict) -> None:
    for _ in range(3):
        if not any(g[2] > 64 for _, g in _owl_windows(env)):
            return
        xdotool(env, "key", "Escape")
        time.sleep(0.05)


def menu_keys(status: dict[str, Any], labels: list[str], autostart_on: bool = False) -> list[str]:
    """The key presses that reach `labels` (a path through submenus) in the menu
    built from `status`. Keyboard navigation skips separators and greyed items."""
    from owl.tray.menu import build_menu

    level = build_menu(status, autostart_on=autostart_on)
    keys: list[str] = []
    for depth, label in enumerate(labels):
        selectable = [it for it in level if it.enabled and not it.separator]
        names = [it.label for it in selectable]
        assert label in names, f"{label!r} is not a selectable item in {names}"
        index = names.index(label)
        keys += ["Down"] * (index + 1 if depth == 0 else index)
        item = selectable[index]
        if item.submenu is not None:
            keys.append("Right")
            level = item.submenu
    return keys + ["Return"]


def choose(env: dict, status: dict[str, Any], *labels: str, autostart_on: bool = False) -> None:
    """Open the menu and pick `labels` (a path through submenus) by keyboard."""
    open_menu(env)
    keys = menu_keys(status, list(labels), autostart_on)
    for key in keys[:-1]:
        xdotool(env, "key", key)
    xdotool(env, "key", keys[-1])


def colour_share(png: Path, colour: tuple[int, int, int], tolerance: int = 24) -> float:
    """The share of a picture's pixels within `tolerance` of `colour`."""
    from PIL import Image

    img = Image.open(png).convert("RGB")
    pixels = list(img.get_flattened_data()) if hasattr(img, "get_flattened_data") else list(img.getdata())
    near = sum(1 for p in pixels if max(abs(a - b) for a, b in zip(p, colour)) <= tolerance)
    return near / len(pixels)


# ------------------------------------------------------------- the tray process


class Tray:
    """Owl's tray in a subprocess over `FakeDaemon`."""

    def __init__(self, env: dict, folder: Path, status: dict[str, Any],
                 extra_env: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.state = folder / "status.json"
        self.calls_file = folder / "calls.jsonl"
        self.log = folder / "tray.log"
        self.set_status(status)
        self.env = dict(env)
        self.env.update(extra_env or {})
        self.env["OWL_HOME"] = str(folder / "owl-home")
        self.env.setdefault("XDG_CONFIG_HOME", str(folder / "config"))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.state), str(self.calls_file)],
            env=self.env, stdout=subprocess.DEVNULL, stderr=self.log.open("wb"), start_new_session=True)

    def set_status(self, status: dict[str, Any], wait: bool = True) -> None:
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(status))
        os.replace(tmp, self.state)
        self.status = status

    def shows(self, env: dict, status: dict[str, Any]) -> None:
        """Switch to `status` and wait until icon, menu and hover text show it."""
        from owl.tray.art import tooltip

        self.set_status(status)
        want = tooltip(status)
        wait_for(lambda: icon_text(env) == want, f"the tray to show {want!r}")

    def calls(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines() if line]

    def wait_call(self, verb: str) -> dict[str, Any]:
        return wait_for(lambda: next((c for c in self.calls() if c["verb"] == verb), None),
                        f"the daemon to be asked to {verb}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def desk() -> Iterator[DisplayEnv]:
    with virtual_display(tray=True, notify=True) as env:
        yield env


@pytest.fixture(scope="module")
def tray(desk: DisplayEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tray]:
    folder = tmp_path_factory.mktemp("tray")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    # A stand-in desktop opener that records what it was asked to open.
    opener = bin_dir / "xdg-open"
    opener.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> {folder / 'opened'}\n")
    opener.chmod(0o755)
    t = Tray(desk, folder, IDLE, {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    find_tray_icon(desk)
    yield t
    t.stop()


@pytest.fixture
def fresh(tray: Tray, desk: DisplayEnv) -> Iterator[Tray]:
    """The shared tray with no menu open and no calls recorded."""
    close_menus(desk)
    tray.calls_file.unlink(missing_ok=True)
    yield tray
    close_menus(desk)


# -------------------------------------------------------------------- tests


def test_icon_docks_and_draws_every_state(fresh: Tray, desk: DisplayEnv) -> None:
    x, y, w, h = find_tray_icon_geometry(desk)
    assert 16 <= w <= 64 and 16 <= h <= 64
    for name, status in [("idle", IDLE), ("waiting", WAITING), ("working", WORKING),
                         ("paused", PAUSED), ("attention", ATTENTION), ("frozen", FROZEN)]:
        fresh.shows(desk, status)
        shot = screenshot(desk, ARTIFACTS / f"icon-{name}.png", (x, y, w, h), scale=8)
        share = colour_share(shot, STATE_COLOURS[name])
        assert share > 0.10, f"{name}: only {share:.0%} of the icon has its colour"
        others = {k: colour_share(shot, c) for k, c in STATE_COLOURS.items()
                  if k != name and {k, name} != {"idle", "frozen"}}
        assert max(others.values()) < share, f"{name} looks like another state: {others}"


def test_frozen_countdown_ticks_every_second(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, FROZEN)
    first = icon_text(desk)
    later = copy.deepcopy(FROZEN)
    later["runs"][0]["grace_left_s"] = 821.0
    fresh.set_status(later)
    wait_for(lambda: "13m 41s left" in icon_text(desk), "the countdown to move on")
    assert "13m 42s left" in first


def test_menu_opens_and_pause_reaches_the_daemon(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, WORKING)
    geometry = open_menu(desk)
    screenshot(desk, ARTIFACTS / "menu-working.png", crop=_around(geometry))
    close_menus(desk)
    choose(desk, WORKING, "Pause")
    assert fresh.wait_call("pause") == {"verb": "pause", "args": {}}


def test_left_click_opens_the_menu_too(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, FROZEN)
    geometry = open_menu(desk, button=1)
    screenshot(desk, ARTIFACTS / "menu-frozen.png", crop=_around(geometry))
    close_menus(desk)
    assert fresh.calls() == []  # the click only opened the menu


def test_paused_menu_offers_resume(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, PAUSED)
    choose(desk, PAUSED, "Resume")
    assert fresh.wait_call("resume")["args"] == {}


def test_work_for_an_hour_asks_for_a_shift(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, WAITING)
    choose(desk, WAITING, "Work for 1 hour")
    assert fresh.wait_call("shift_start")["args"] == {"for_s": 3600.0}


def test_drop_a_job_from_the_jobs_submenu(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, WORKING)
    open_menu(desk)
    for key in menu_keys(WORKING, ["Jobs (2)", "2. Write the docs — pending"])[:-1]:
        xdotool(desk, "key", key)
    wait_for(lambda: len([g for _, g in _owl_windows(desk) if g[2] > 64]) >= 3, "the submenus to open")
    screenshot(desk, ARTIFACTS / "menu-jobs.png", crop=(480, 0, 800, 330))
    close_menus(desk)
    choose(desk, WORKING, "Jobs (2)", "2. Write the docs — pending", "Drop")
    assert fresh.wait_call("drop")["args"] == {"job_id": 13, "force": False}


def test_a_refused_verb_is_shown_and_the_tray_goes_on(fresh: Tray, desk: DisplayEnv) -> None:
    status = doc(queue=[job(13, 1)], waiting="on battery", _refuse={"start": "the machine is on battery"})
    status["machine"].update(on_ac_power=False, reason="on battery")
    fresh.shows(desk, status)
    _dunst(desk, "close-all")
    choose(desk, status, "Start")
    fresh.wait_call("start")
    wait_for(lambda: int(_dunst(desk, "count", "displayed") or 0) > 0, "a notification")
    screenshot(desk, ARTIFACTS / "refused.png", crop=(640, 0, 640, 240))
    _dunst(desk, "close-all")
    assert "the machine is on battery" in _dunst(desk, "history")
    assert fresh.proc.poll() is None


def test_show_log_of_a_finished_run_opens_it(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, ATTENTION)
    opened = fresh.folder / "opened"
    opened.unlink(missing_ok=True)
    choose(desk, ATTENTION, "✗ Job 11: Bump the deps — killed")
    wait_for(opened.exists, "the log to be opened")
    assert opened.read_text().split() == ["/dev/null"]


def test_start_at_login_checkbox_writes_the_login_item(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, IDLE)
    item = Path(fresh.env["XDG_CONFIG_HOME"]) / "autostart" / "owl.desktop"
    item.unlink(missing_ok=True)
    choose(desk, IDLE, "Start at login", autostart_on=False)
    wait_for(item.exists, "the autostart entry")
    assert subprocess.run(["desktop-file-validate", str(item)]).returncode == 0
    choose(desk, IDLE, "Start at login", autostart_on=True)
    wait_for(lambda: not item.exists(), "the autostart entry to go")


def test_quit_ends_the_runs_and_exits(desk: DisplayEnv, tmp_path: Path) -> None:
    t = Tray(desk, tmp_path, WORKING)
    try:
        # The shared tray may be docked too: this one is found by its pid.
        wait_for(lambda: _pid_windows(desk, t.proc.pid), "the tray")
        choose_in(desk, t, WORKING, "Quit")
        assert t.proc.wait(TIMEOUT) == 0
        assert t.calls()[-1] == {"verb": "request_stop"}
    finally:
        t.stop()


def test_sigterm_ends_the_runs_and_exits(desk: DisplayEnv, tmp_path: Path) -> None:
    t = Tray(desk, tmp_path, WORKING)
    try:
        wait_for(lambda: _pid_windows(desk, t.proc.pid), "the tray")
        t.proc.send_signal(signal.SIGTERM)
        assert t.proc.wait(TIMEOUT) == 0
        assert t.calls() == [{"verb": "request_stop"}]
    finally:
        t.stop()


def test_no_display_means_no_tray(monkeypatch: pytest.MonkeyPatch) -> None:
    from owl.tray.app import TrayUnavailable, choose_backend

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("PYSTRAY_BACKEND", raising=False)
    with pytest.raises(TrayUnavailable, match="no display"):
        choose_backend(None, wait_s=0)


def test_xorg_backend_is_refused_for_having_no_menu() -> None:
    from owl.tray.app import TrayUnavailable, choose_backend

    with pytest.raises(TrayUnavailable, match="no menu"):
        choose_backend("xorg")


def test_a_desktop_without_a_tray_host_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from owl.tray.app import TrayUnavailable, choose_backend

    with virtual_display(tray=False, notify=False) as env:
        env.activate(monkeypatch)
        monkeypatch.delenv("PYSTRAY_BACKEND", raising=False)
        with pytest.raises(TrayUnavailable, match="no system tray"):
            choose_backend(None, wait_s=0.3)


def test_the_tray_host_is_detected(desk: DisplayEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from owl.tray.app import choose_backend

    desk.activate(monkeypatch)
    monkeypatch.delenv("PYSTRAY_BACKEND", raising=False)
    assert choose_backend(None, wait_s=1) == "gtk"


# ------------------------------------------------------------ small helpers


def _around(geometry: tuple[int, int, int, int], pad: int = 12) -> tuple[int, int, int, int]:
    x, y, w, h = geometry
    x0, y0 = max(0, x - pad), max(0, y - pad)
    return x0, y0, w + 2 * pad + 60, h + 2 * pad


def _dunst(env: dict, *args: str) -> str:
    out = subprocess.run(["dunstctl", *args], env=env, capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def _pid_windows(env: dict, pid: int) -> list[str]:
    return _x(env, "search", "--onlyvisible", "--pid", str(pid)).split()


def choose_in(env: dict, t: Tray, status: dict[str, Any], *labels: str) -> None:
    """`choose` on the icon of the tray process `t`, when several are docked."""
    def docked() -> list[tuple[int, int, int, int]]:
        icons = _pid_windows(env, t.proc.pid)
        return [g for wid, g in _owl_windows(env)
                if wid in icons and g[2] <= 64 and g[3] <= 64 and g[2] > 1]
    # The icon docks a moment after the tray process draws it: wait for that.
    wait_for(lambda: bool(docked()), "this tray's icon to dock in the tray host")
    x, y, w, h = docked()[0]
    xdotool(env, "mousemove", str(x + w // 2), str(y + h // 2), "click", "3")
    wait_for(lambda: any(g[2] > 64 for _, g in _owl_windows(env)), "the menu to open")
    wait_for(lambda: keyboard_grabbed(env), "the menu to take the keyboard")
    for key in menu_keys(status, list(labels)):
        xdotool(env, "key", key)


# ------------------------------------------------ the stand-in daemon (a script)


class FakeDaemon:
    """DaemonLike over files: status from a JSON file, verbs to a JSON-lines log.

    A status document may carry `_refuse` {verb: reason} to make `call`
    refuse that verb the way the real daemon does, and `_answer` {verb: reply}
    to answer it (the review page's path, say).
    """

    def __init__(self, state: Path, calls: Path) -> None:
        self.state, self.calls = state, calls

    def status(self) -> dict:
        return json.loads(self.state.read_text())

    def call(self, verb: str, **args: Any) -> dict:
        from owl.errors import Refused

        self._log({"verb": verb, "args": args})
        reason = (self.status().get("_refuse") or {}).get(verb)
        if reason:
            raise Refused(reason)
        return (self.status().get("_answer") or {}).get(verb) or {"ok": True}

    def request_stop(self) -> None:
        self._log({"verb": "request_stop"})

    def _log(self, entry: dict) -> None:
        with self.calls.open("a") as f:
            f.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    from owl.tray.app import run_tray

    # argv: STATUS_JSON CALLS_JSONL [SLOW_S] — tests refresh fast, benchmarks as shipped.
    slow = float(sys.argv[3]) if len(sys.argv) > 3 else 0.25
    raise SystemExit(run_tray(FakeDaemon(Path(sys.argv[1]), Path(sys.argv[2])), host_wait_s=5, slow_s=slow))
