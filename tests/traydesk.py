"""Owl's tray on a real (virtual) desktop, driven the way a person would.

`Tray` runs the tray in its own process over a stand-in daemon (`FakeDaemon`,
at the bottom of this file, run as a script): its status document is a JSON
file the test rewrites (`doc`, `IDLE`, `WORKING`...), and every verb the menu
asks for is appended to a calls file. The desktop helpers — `find_tray_icon`,
`screenshot`, `open_menu`, `walk_menu`, `choose`, `dunst` — only need the
desktop's environment, so the same steps drive a tray over the real daemon.

    desk = display_fixture(scope="module", tray=True, notify=True)
    tray = stand_in_tray_fixture("tray")
    fresh = fresh_tray_fixture()

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

from display import DisplayEnv, xdotool

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "tray"
TIMEOUT = 10.0

# ------------------------------------------------------------ status documents

BASE: dict[str, Any] = {
    "version": "0.1.0",
    "machine": {
        "idle": False,
        "idle_for_s": 12.0,
        "on_ac_power": True,
        "reason": "in use",
        "idle_in_s": 588.0,
        "detectors": ["xscreensaver"],
        "problem": None,
    },
    "paused": False,
    "shift": None,
    "awake": {"held": False, "backend": "none", "problem": None},
    "runs": [],
    "queue": [],
    "waiting": None,
    "recent": [],
    "review": [],
    "attention": None,
    "config_problem": None,
}


def doc(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d.update(changes)
    return d


def job(
    id: int,
    position: int,
    state: str = "pending",
    title: str = "Write the docs",
    worktree: str | None = None,
) -> dict[str, Any]:
    return {
        "id": id,
        "position": position,
        "state": state,
        "title": title,
        "project": "/src/app",
        "worktree": worktree,
    }


def run(job_id: int = 12, state: str = "running", **extra: Any) -> dict[str, Any]:
    r = {
        "id": 7,
        "job_id": job_id,
        "title": "Fix the flaky test",
        "state": state,
        "frozen_by": None,
        "grace_left_s": None,
        "running_for_s": 250.0,
        "pids": [4242],
    }
    r.update(extra)
    return r


IDLE = doc()
WAITING = doc(queue=[job(13, 1)])
WORKING = doc(runs=[run()], queue=[job(12, 1, "active", "Fix the flaky test"), job(13, 2)])
FROZEN = doc(
    runs=[run(state="frozen", frozen_by="machine", grace_left_s=822.0)],
    queue=[job(12, 1, "active", "Fix the flaky test")],
)
PAUSED = doc(paused=True, queue=[job(13, 1)])
ATTENTION = doc(
    attention="Run 6 of job 11 was killed",
    recent=[
        {
            "run_id": 6,
            "job_id": 11,
            "title": "Bump the deps",
            "outcome": "interrupted",
            "ended_by": "sigkill",
            "reason": "did not stop within 5 s",
            "ended_at": "2026-01-01T10:00:00Z",
            "log": "/dev/null",
        }
    ],
)

# Body colours of the owl per state (owl.tray.art), as drawn on screen.
STATE_COLOURS = {
    "idle": (138, 148, 166),
    "waiting": (74, 144, 226),
    "working": (52, 178, 89),
    "frozen": (140, 215, 250),
    "paused": (242, 166, 35),
    "attention": (230, 60, 50),
}

# ------------------------------------------------------------ the desktop


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


def owl_windows(env: dict) -> list[tuple[str, tuple[int, int, int, int]]]:
    """(window id, (x, y, w, h)) of each visible window of class "owl": icons and menus."""
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
        icons = [w for w in owl_windows(env) if w[1][2] <= 64 and w[1][3] <= 64 and w[1][2] > 1]
        return icons[0] if icons else None

    return wait_for(docked, "Owl's icon in the tray")


def window_type(env: dict, wid: str) -> str:
    """The window's _NET_WM_WINDOW_TYPE as xprop says it ("" if unset or gone)."""
    out = subprocess.run(
        ["xprop", "-id", wid, "_NET_WM_WINDOW_TYPE"],
        env=env,
        capture_output=True,
        text=True,
        timeout=10,
    )
    return out.stdout.split("=", 1)[1].strip() if "=" in out.stdout else ""


def open_menus(env: dict) -> list[tuple[int, int, int, int]]:
    """The geometry of each open menu: an Owl window GTK marks as a popup menu.
    Not any wide one: the icon's hover text is a tooltip window of Owl's too, and
    GTK shows it at times over an open menu when the pointer rests on the icon."""
    return [g for wid, g in owl_windows(env) if is_menu(env, wid)]


def is_menu(env: dict, wid: str) -> bool:
    return "_NET_WM_WINDOW_TYPE_POPUP_MENU" in window_type(env, wid)


def find_tray_icon_geometry(env: dict) -> tuple[int, int, int, int]:
    return find_tray_icon(env)[1]


def icon_text(env: dict) -> str:
    """The icon window's name: pystray's gtk backend sets it to the title."""
    return _x(env, "getwindowname", find_tray_icon(env)[0])


def screenshot(
    env: dict, path: Path, crop: tuple[int, int, int, int] | None = None, scale: int = 1
) -> Path:
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
    return popped(
        env,
        lambda: xdotool(env, "mousemove", str(x + w // 2), str(y + h // 2), "click", str(button)),
        lambda: next(iter(open_menus(env)), None),
    )


def popped(
    env: dict,
    click: Callable[[], object],
    menu: Callable[[], tuple[int, int, int, int] | None],
    tries: int = 3,
) -> tuple[int, int, int, int]:
    """Click until `menu()` shows the menu open and it holds the keyboard; its geometry.

    A menu is mapped a moment before it takes the keyboard, and keys sent in
    between are lost: so the keyboard's grab is waited for. From outside, the
    only way to see that grab is to try to take it (`keyboard_grabbed`), and a
    try that falls in the very moment the menu takes it fails the menu's
    grab: the menu stays open, deaf to keys. A person clicks again; so does
    this, at most `tries` times."""
    for _ in range(tries):
        click()
        geometry = wait_for(menu, "the menu to open")
        try:
            wait_for(lambda: keyboard_grabbed(env), "the menu to take the keyboard", timeout=3.0)
        except AssertionError:
            continue
        return geometry
    raise AssertionError(f"timed out waiting for the menu to take the keyboard ({tries} clicks)")


def keyboard_grabbed(env: dict) -> bool:
    """True while another client (an open menu) holds the keyboard grab."""
    from Xlib import X, display as xdisplay

    d = xdisplay.Display(env["DISPLAY"])
    try:
        status = d.screen().root.grab_keyboard(
            False, X.GrabModeAsync, X.GrabModeAsync, X.CurrentTime
        )
        if status == X.GrabSuccess:
            d.ungrab_keyboard(X.CurrentTime)
            d.sync()
        return status == X.AlreadyGrabbed
    finally:
        d.close()


def menus_closed(env: dict) -> None:
    """Wait until no menu is open and none holds the keyboard: the menu of the
    last choice goes away a moment after its Return, and while it does a click
    on the icon lands on it (closing it) and keys go to it, and are lost."""
    wait_for(lambda: not open_menus(env) and not keyboard_grabbed(env), "the last menu to close")


def close_menus(env: dict) -> None:
    for _ in range(3):
        if not open_menus(env):
            return
        xdotool(env, "key", "Escape")
        time.sleep(0.05)


def menu_keys(
    status: dict[str, Any], labels: list[str], autostart_on: bool = False, owns_daemon: bool = True
) -> list[str]:
    """The key presses that reach `labels` (a path through submenus) in the menu
    built from `status`. Keyboard navigation skips separators and greyed items."""
    from owl.tray.menu import build_menu

    level = build_menu(status, autostart_on=autostart_on, owns_daemon=owns_daemon)
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


def walk_menu(
    env: dict, status: dict[str, Any], *labels: str, menus: int
) -> list[tuple[int, int, int, int]]:
    """Open the menu and move to `labels` (a path through submenus) by keyboard
    without picking it; returns the open menus once there are `menus` of them.
    A "Return" then picks it."""
    open_menu(env)
    for key in menu_keys(status, list(labels))[:-1]:
        xdotool(env, "key", key)
    return wait_for(
        lambda: (m := open_menus(env)) and len(m) >= menus and m, f"{menus} menus to be open"
    )


def choose(env: dict, status: dict[str, Any], *labels: str, autostart_on: bool = False) -> None:
    """Open the menu and pick `labels` (a path through submenus) by keyboard."""
    menus_closed(env)
    open_menu(env)
    keys = menu_keys(status, list(labels), autostart_on)
    for key in keys[:-1]:
        xdotool(env, "key", key)
    xdotool(env, "key", keys[-1])


def colour_share(png: Path, colour: tuple[int, int, int], tolerance: int = 24) -> float:
    """The share of a picture's pixels within `tolerance` of `colour`."""
    from PIL import Image

    img = Image.open(png).convert("RGB")
    pixels = (
        list(img.get_flattened_data())
        if hasattr(img, "get_flattened_data")
        else list(img.getdata())
    )
    near = sum(1 for p in pixels if max(abs(a - b) for a, b in zip(p, colour)) <= tolerance)
    return near / len(pixels)


def choose_in(env: dict, t: "Tray", status: dict[str, Any], *labels: str) -> None:
    """`choose` on the icon of the tray process `t`, when several are docked."""

    def docked() -> list[tuple[int, int, int, int]]:
        icons = pid_windows(env, t.proc.pid)
        return [
            g
            for wid, g in owl_windows(env)
            if wid in icons and g[2] <= 64 and g[3] <= 64 and g[2] > 1
        ]

    # The icon docks a moment after the tray process draws it: wait for that.
    wait_for(lambda: bool(docked()), "this tray's icon to dock in the tray host")
    x, y, w, h = docked()[0]

    def its_menu() -> tuple[int, int, int, int] | None:
        # this tray's own (another one docked may have a menu of its own)
        mine = pid_windows(env, t.proc.pid)
        return next((g for wid, g in owl_windows(env) if wid in mine and is_menu(env, wid)), None)

    popped(
        env,
        lambda: xdotool(env, "mousemove", str(x + w // 2), str(y + h // 2), "click", "3"),
        its_menu,
    )
    for key in menu_keys(status, list(labels)):
        xdotool(env, "key", key)


def pid_windows(env: dict, pid: int) -> list[str]:
    """The visible windows of process `pid`."""
    return _x(env, "search", "--onlyvisible", "--pid", str(pid)).split()


def dunst(env: dict, *args: str) -> str:
    """What `dunstctl ARGS` prints (the notification daemon's count, history...)."""
    out = subprocess.run(["dunstctl", *args], env=env, capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def recording_opener(folder: Path) -> dict[str, str]:
    """A stand-in desktop opener (`xdg-open`) that notes each path it is asked
    to open in folder/opened (see `opened`); returns the PATH that puts it first."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    opener = bin_dir / "xdg-open"
    opener.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> {folder / 'opened'}\n")
    opener.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def opened(folder: Path) -> list[str]:
    """What the stand-in opener in `folder` has been asked to open, in order."""
    f = folder / "opened"
    return f.read_text().split() if f.exists() else []


# ------------------------------------------------------------- the tray process


class Tray:
    """Owl's tray in a subprocess over `FakeDaemon`."""

    def __init__(
        self,
        env: dict,
        folder: Path,
        status: dict[str, Any],
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.folder = folder
        self.state = folder / "status.json"
        self.calls_file = folder / "calls.jsonl"
        self.log = folder / "tray.log"
        self._marks = 0
        self.set_status(status)
        self.env = dict(env)
        self.env.update(extra_env or {})
        self.env["OWL_HOME"] = str(folder / "owl-home")
        self.env.setdefault("XDG_CONFIG_HOME", str(folder / "config"))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.state), str(self.calls_file)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("wb"),
            start_new_session=True,
        )

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

    def shows_anew(self, env: dict, status: dict[str, Any]) -> None:
        """`shows`, after giving `status` a note of its own in the hover text: a
        document that looks like the one on screen would be taken as shown at
        once, before its menu is (the tray sets the hover text after the menu)."""
        self._marks += 1
        status["config_problem"] = f"status {self._marks}"
        self.shows(env, status)

    def calls(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines() if line]

    def wait_call(self, verb: str) -> dict[str, Any]:
        return wait_for(
            lambda: next((c for c in self.calls() if c["verb"] == verb), None),
            f"the daemon to be asked to {verb}",
        )

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def stand_in_tray_fixture(name: str) -> Any:
    """Make a module-scoped fixture: one `Tray` over `FakeDaemon` showing IDLE on
    the `desk` fixture's desktop, with the recording opener, docked before use."""

    @pytest.fixture(scope="module")
    def _fixture(desk: DisplayEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tray]:
        folder = tmp_path_factory.mktemp(name)
        t = Tray(desk, folder, IDLE, recording_opener(folder))
        find_tray_icon(desk)
        yield t
        t.stop()

    return _fixture


def fresh_tray_fixture() -> Any:
    """Make a fixture: the module's `tray` with no menu open, no calls recorded
    and nothing opened yet."""

    @pytest.fixture
    def _fixture(tray: Tray, desk: DisplayEnv) -> Iterator[Tray]:
        close_menus(desk)
        tray.calls_file.unlink(missing_ok=True)
        (tray.folder / "opened").unlink(missing_ok=True)
        yield tray
        close_menus(desk)

    return _fixture


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
    raise SystemExit(
        run_tray(FakeDaemon(Path(sys.argv[1]), Path(sys.argv[2])), host_wait_s=5, slow_s=slow)
    )
