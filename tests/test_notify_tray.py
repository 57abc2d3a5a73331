"""Coming back, on a virtual desktop with the REAL daemon and tray: the idle
monitor reads the X server (Xvfb), a Job reaches review while nobody touches
it, and the first input after that brings one "Welcome back" notification,
whose Review button (pressed through dunst) opens the newest review page; the
briefing tops the tray's menu."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from display import DisplayEnv, display_fixture, xdotool  # noqa: E402
from notify_servers import Receiver  # noqa: E402
from owl.tray.menu import build_menu  # noqa: E402
from owlproc import make_project, wait_for  # noqa: E402
from test_tray_daemon import OwlTray, shows  # noqa: E402
from traydesk import dunst, opened, recording_opener  # noqa: E402

pytestmark = [pytest.mark.display, pytest.mark.timeout(180)]

desk = display_fixture(scope="module", tray=True, notify=True)


def test_welcome_back_with_its_review_button(desk: DisplayEnv, tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    env = dict(desk, **recording_opener(tmp_path))
    dunst(desk, "close-all")
    with (
        Receiver() as rx,
        OwlTray(
            tmp_path / "home", env, config={"notify": {"away": [rx.url()], "batch": "0s"}}
        ) as d,
    ):
        # What is there when the tray starts is not news: the Job is added once
        # the tray has read the daemon, as a person's would be.
        shows(desk, lambda t: t == "Owl: Nothing to do", "nothing to do", timeout=30)
        job = d.add("write=hello.txt commit=Add_hello exit=0", project)
        d.wait_job(job, "review", timeout=30)
        wait_for(lambda: rx.got, 15, what="the message sent while away")
        wait_for(
            lambda: "ready for review" in dunst(desk, "history"),
            20,
            what="the desktop's own ready-for-review notification",
        )
        dunst(desk, "close-all")
        assert "While you were away" not in dunst(desk, "history")
        xdotool(desk, "mousemove", "--sync", "200", "200")
        xdotool(desk, "mousemove", "--sync", "210", "220")
        brief = wait_for(
            lambda: (d.status().get("notify") or {}).get("briefing"), 15, what="the briefing"
        )
        assert brief["review"] == job and f"job {job} ready for review" in brief["text"]
        wait_for(
            lambda: (
                "While you were away" in dunst(desk, "history")
                or int(dunst(desk, "count", "displayed") or 0) > 0
            ),
            20,
            what="the welcome-back notification",
        )
        assert [i.label for i in build_menu(d.status())][0].startswith("While you were away (")
        dunst(desk, "action", "0")
        page = Path(wait_for(lambda: opened(tmp_path), 15, what="the review page opened")[0])
        assert page == d.home / "reviews" / f"job-{job}.html"
    assert "Traceback" not in d.log_text(), d.log_text()
