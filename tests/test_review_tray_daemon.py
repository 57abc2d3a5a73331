"""Coming back through the tray over the REAL daemon, on a virtual desktop.

A Job runs to review; its "ready for review" notification's Review button,
pressed through dunst, writes the real review page and opens it (with a
stand-in opener that records what it was given); then Merge into main, picked
from the Job's submenu with the keyboard, fast-forwards the project's main
and the Job is done.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from display import DisplayEnv, display_fixture, xdotool
from owl.tray.menu import build_menu
from owlproc import make_project, wait_for
from test_tray_daemon import OwlTray, shows
from traydesk import (
    ARTIFACTS,
    dunst,
    find_tray_icon_geometry,
    opened,
    recording_opener,
    screenshot,
    walk_menu,
)

pytestmark = [pytest.mark.display, pytest.mark.timeout(180)]


desk = display_fixture(scope="module", tray=True, notify=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_review_from_the_notification_and_merge_from_the_menu(
    desk: DisplayEnv, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "project")
    env = dict(desk, **recording_opener(tmp_path))
    dunst(desk, "close-all")
    with OwlTray(tmp_path / "home", env) as d:
        # What is there when the tray starts is not news: add once it has read the daemon.
        shows(desk, lambda t: t == "Owl: Nothing to do", "nothing to do", timeout=30)
        job = d.add(
            "Add a hello file for new contributors write=hello.txt commit=Add_hello exit=0", project
        )
        j = d.wait_job(job, "review", timeout=30)
        # the tray shows the notification in the same refresh that puts the Job
        # in its menu
        wait_for(
            lambda: (
                "ready for review" in dunst(desk, "history")
                or int(dunst(desk, "count", "displayed") or 0) > 0
            ),
            20,
            what="the ready-for-review notification",
        )
        dunst(desk, "action", "0")
        page = Path(wait_for(lambda: opened(tmp_path), 15, what="the review page opened")[0])
        assert page == d.home / "reviews" / f"job-{job}.html"
        html = page.read_text()
        assert "Add hello" in html and "hello.txt" in html

        status = d.status()
        label = next(i.label for i in build_menu(status) if i.label.startswith(f"◆ Job {job}:"))
        menus = walk_menu(desk, status, label, "Merge into main", menus=2)
        icon = find_tray_icon_geometry(desk)
        boxes = menus + [icon]
        x0, y0 = min(b[0] for b in boxes) - 8, max(0, min(b[1] for b in boxes) - 1)
        x1 = max(b[0] + b[2] for b in boxes) + 8
        y1 = max(b[1] + b[3] for b in boxes) + 8
        screenshot(
            desk, ARTIFACTS / "daemon-menu-review.png", (max(0, x0), y0, x1 - max(0, x0), y1 - y0)
        )
        xdotool(desk, "key", "Return")
        wait_for(lambda: d.job(job)["state"] == "done", 15, what="the Job done")
        assert git(project, "rev-parse", "main") == git(project, "rev-parse", j["branch"])
        assert (project / "hello.txt").exists() and not Path(j["worktree"]).exists()
        wait_for(
            lambda: (
                "fast-forwarded" in dunst(desk, "history")
                or int(dunst(desk, "count", "displayed") or 0) > 0
            ),
            10,
            what="the merge's outcome said",
        )
    assert "Traceback" not in d.log_text(), d.log_text()
