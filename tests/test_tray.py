"""The tray on a real (virtual) desktop: Xvfb, trayer, dunst, xdotool.

The tray runs in its own process over a stand-in daemon (`traydesk.Tray`
over `traydesk.FakeDaemon`): its status document is a JSON file the test
rewrites, and every verb the menu asks for is appended to a calls file.

Screenshots go to test-artifacts/tray/.
"""

from __future__ import annotations

import copy
import signal
import subprocess
from pathlib import Path

import pytest

from display import DisplayEnv, display_fixture, virtual_display
from traydesk import (
    ARTIFACTS,
    ATTENTION,
    FROZEN,
    IDLE,
    PAUSED,
    STATE_COLOURS,
    TIMEOUT,
    WAITING,
    WORKING,
    Tray,
    choose,
    choose_in,
    close_menus,
    colour_share,
    doc,
    dunst,
    find_tray_icon_geometry,
    fresh_tray_fixture,
    icon_text,
    job,
    open_menu,
    open_menus,
    pid_windows,
    run,
    screenshot,
    stand_in_tray_fixture,
    wait_for,
    walk_menu,
)

pytestmark = pytest.mark.display

desk = display_fixture(scope="module", tray=True, notify=True)
tray = stand_in_tray_fixture("tray")
fresh = fresh_tray_fixture()


# -------------------------------------------------------------------- tests


def test_icon_docks_and_draws_every_state(fresh: Tray, desk: DisplayEnv) -> None:
    x, y, w, h = find_tray_icon_geometry(desk)
    assert 16 <= w <= 64 and 16 <= h <= 64
    for name, status in [
        ("idle", IDLE),
        ("waiting", WAITING),
        ("working", WORKING),
        ("paused", PAUSED),
        ("attention", ATTENTION),
        ("frozen", FROZEN),
    ]:
        fresh.shows(desk, status)
        shot = screenshot(desk, ARTIFACTS / f"icon-{name}.png", (x, y, w, h), scale=8)
        share = colour_share(shot, STATE_COLOURS[name])
        assert share > 0.10, f"{name}: only {share:.0%} of the icon has its colour"
        others = {
            k: colour_share(shot, c)
            for k, c in STATE_COLOURS.items()
            if k != name and {k, name} != {"idle", "frozen"}
        }
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


def test_the_open_menu_follows_a_freeze_and_its_countdown_moves(
    fresh: Tray, desk: DisplayEnv
) -> None:
    """Opening the menu is input: the Run freezes as the menu opens. The menu on
    screen then says so, and its countdown moves, as the hover text does,
    without being opened again."""
    from PIL import Image, ImageChops

    def differs(a: Path, b: Path) -> bool:
        with Image.open(a) as x, Image.open(b) as y:
            return ImageChops.difference(x.convert("RGB"), y.convert("RGB")).getbbox() is not None

    working = doc(runs=[run()], queue=[job(12, 1, "active", "Fix the flaky test"), job(13, 2)])
    frozen = copy.deepcopy(working)
    frozen["runs"] = [run(state="frozen", frozen_by="machine", grace_left_s=822.0)]
    fresh.shows(desk, working)
    crop = _around(open_menu(desk), pad=120)
    shots = ARTIFACTS / "open-menu"
    opened = screenshot(desk, shots / "1-working.png", crop=crop)
    fresh.set_status(frozen)
    wait_for(lambda: "Frozen · 13m 42s left" in icon_text(desk), "the hover text to say frozen")
    wait_for(
        lambda: differs(screenshot(desk, shots / "2-frozen.png", crop=crop), opened),
        "the open menu to say frozen",
    )
    assert len(open_menus(desk)) == 1  # the same menu, open all along
    later = copy.deepcopy(frozen)
    later["runs"][0]["grace_left_s"] = 821.0
    fresh.set_status(later)
    wait_for(lambda: "13m 41s left" in icon_text(desk), "the hover text to count down")
    wait_for(
        lambda: differs(
            screenshot(desk, shots / "3-a-second-later.png", crop=crop), shots / "2-frozen.png"
        ),
        "the open menu's countdown to move",
    )
    assert len(open_menus(desk)) == 1


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
    walk_menu(desk, WORKING, "Jobs (2)", "2. Write the docs — pending", menus=3)
    screenshot(desk, ARTIFACTS / "menu-jobs.png", crop=(480, 0, 800, 330))
    close_menus(desk)
    choose(desk, WORKING, "Jobs (2)", "2. Write the docs — pending", "Drop")
    assert fresh.wait_call("drop")["args"] == {"job_id": 13, "force": False}


def test_a_refused_verb_is_shown_and_the_tray_goes_on(fresh: Tray, desk: DisplayEnv) -> None:
    status = doc(
        queue=[job(13, 1)], waiting="on battery", _refuse={"start": "the machine is on battery"}
    )
    status["machine"].update(on_ac_power=False, reason="on battery")
    fresh.shows(desk, status)
    dunst(desk, "close-all")
    choose(desk, status, "Start")
    fresh.wait_call("start")
    wait_for(lambda: int(dunst(desk, "count", "displayed") or 0) > 0, "a notification")
    screenshot(desk, ARTIFACTS / "refused.png", crop=(640, 0, 640, 240))
    dunst(desk, "close-all")
    assert "the machine is on battery" in dunst(desk, "history")
    assert fresh.proc.poll() is None


def test_show_log_of_a_finished_run_opens_it(fresh: Tray, desk: DisplayEnv) -> None:
    fresh.shows(desk, ATTENTION)
    opened = fresh.folder / "opened"
    opened.unlink(missing_ok=True)
    choose(desk, ATTENTION, "✗ Job 11: Bump the deps — killed (run 6)")
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
        wait_for(lambda: pid_windows(desk, t.proc.pid), "the tray")
        choose_in(desk, t, WORKING, "Quit")
        assert t.proc.wait(TIMEOUT) == 0
        assert t.calls()[-1] == {"verb": "request_stop"}
    finally:
        t.stop()


def test_sigterm_ends_the_runs_and_exits(desk: DisplayEnv, tmp_path: Path) -> None:
    t = Tray(desk, tmp_path, WORKING)
    try:
        wait_for(lambda: pid_windows(desk, t.proc.pid), "the tray")
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
