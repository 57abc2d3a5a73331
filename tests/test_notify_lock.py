"""A locked screen is away at once, for what goes to the person's channels: heard
through a real session bus from a stand-in of the desktop's own interface
(`org.freedesktop.ScreenSaver`'s ActiveChanged, logind's LockedHint), by the
real daemon, with real Apprise delivering to a local receiver."""

from __future__ import annotations

from pathlib import Path

import pytest

from owlproc import OwlDaemon, make_project, wait_for
from support.need import programs
from support.notify_servers import Receiver
from support.screensaver import Desktop


def told(rx: Receiver) -> list[str]:
    return [str(g["body"].get("title")) for g in rx.got]


def locked_daemon(home: Path, desk: Desktop, rx: Receiver, **env: str) -> OwlDaemon:
    return OwlDaemon(
        home,
        config={"notify": {"away": [rx.url()], "batch": "0s"}},
        env={"DBUS_SESSION_BUS_ADDRESS": desk.address, **env},
    )


def test_a_locked_screen_sends_what_needs_you_though_input_was_recent(tmp_path: Path) -> None:
    programs("dbus-daemon")
    project = make_project(tmp_path / "p")
    with Desktop() as desk, Receiver() as rx, locked_daemon(tmp_path / "home", desk, rx) as d:
        d.machine("input")  # the person is at the keyboard ...
        d.ok("shift", "start", "--for", "1h")  # ... and lets Runs work beside them
        wait_for(
            lambda: d.status()["machine"]["lock_sources"] == ["screensaver"],
            what="GetActive answered",
        )
        assert d.status()["machine"]["screen_locked"] is False
        desk.lock()  # ... then locks the screen: away at once
        st = wait_for(lambda: (s := d.status())["notify"]["away"] and s, what="away on lock")
        assert st["machine"]["screen_locked"] is True and st["machine"]["idle_for_s"] == 0
        [line] = [ln for ln in d.ok("status").splitlines() if ln.startswith("machine:")]
        assert line.split(":", 1)[1].strip().startswith("screen locked · in use"), line
        first = d.add("write=a commit=one exit=0", project)
        d.wait_job(first, "review")
        wait_for(lambda: told(rx), timeout=15, what="the message")
        assert told(rx) == [f"Owl: Job {first} ready for review"]

        desk.lock(False)  # unlocked, and typing: present again
        d.machine("input")
        wait_for(lambda: not d.status()["notify"]["away"], what="presence on unlock")
        assert d.status()["machine"]["screen_locked"] is False
        second = d.add("write=b commit=two exit=0", project)
        d.wait_job(second, "review")
        # Locked once more, a third: its message comes after whatever the second
        # would have sent, since the notify thread takes events in order.
        desk.lock()
        wait_for(lambda: d.status()["notify"]["away"], what="away on the second lock")
        third = d.add("write=c commit=three exit=0", project)
        d.wait_job(third, "review")
        wait_for(lambda: len(rx.got) >= 2, timeout=15, what="the third's message")
        assert told(rx) == [
            f"Owl: Job {first} ready for review",
            f"Owl: Job {third} ready for review",
        ]


@pytest.mark.parametrize(
    "name,heard", [("org.gnome.ScreenSaver", "screensaver"), ("logind", "logind")]
)
def test_gnomes_screensaver_and_loginds_locked_hint_are_heard_too(
    tmp_path: Path, name: str, heard: str
) -> None:
    programs("dbus-daemon")
    with (
        Desktop(name) as desk,
        Receiver() as rx,
        locked_daemon(tmp_path / "home", desk, rx, OWL_LOGIND_BUS="session") as d,
    ):
        d.machine("input")
        wait_for(lambda: d.status()["machine"]["lock_sources"] == [heard], what="the first read")
        desk.lock()
        st = wait_for(lambda: (s := d.status())["notify"]["away"] and s, what="away on lock")
        assert st["machine"]["screen_locked"] is True
        desk.lock(False)
        wait_for(lambda: not d.status()["notify"]["away"], what="presence on unlock")
