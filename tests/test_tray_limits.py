"""The tray while an agent waits out a usage limit: the menu's top line, the
tooltip, and one notification when the wait begins."""

from __future__ import annotations

from test_tray_art import doc, job, run

from owl.tray.art import tooltip
from owl.tray.menu import build_menu
from owl.tray.wording import status_line
from owl.tray.notices import Notices

WAIT = {
    "agent": "claude",
    "kind": "five_hour",
    "until": "2026-12-01T08:10:00",
    "until_epoch": 1796112600.0,
    "left_s": 600.0,
    "reason": "Claude's 5-hour usage limit; resets at 08:10",
}


def test_the_menu_and_tooltip_say_work_waits_for_the_limit_and_until_when() -> None:
    status = doc(
        queue=[job()],
        limits=[WAIT],
        machine={"idle": True},
        waiting="job 13 waits for Claude's 5-hour usage limit; resets at 08:10",
    )
    assert status_line(status) == "Waiting for the usage limit · until 08:10"
    assert tooltip(status).startswith("Owl: Waiting for the usage limit · until 08:10")
    assert build_menu(status)[0].label == "Waiting for the usage limit · until 08:10"
    service = dict(WAIT, kind="service")
    assert (
        status_line(doc(queue=[job()], limits=[service]))
        == "Waiting for the model's service · until 08:10"
    )
    # a Run at work, or nothing queued, says so instead
    assert status_line(doc(queue=[job()], limits=[WAIT], runs=[run()])).startswith("Working on")
    assert status_line(doc(limits=[WAIT])) == "Nothing to do"


def test_one_notification_when_a_wait_begins() -> None:
    n = Notices()
    assert n.update(doc()) == []
    said = n.update(doc(queue=[job()], limits=[WAIT]))
    assert said == [
        (
            "Work waits until 08:10",
            "Claude's 5-hour usage limit; resets at 08:10\nIt carries on by itself then.",
        )
    ]
    assert n.update(doc(queue=[job()], limits=[WAIT])) == []
    later = dict(WAIT, until="2026-12-01T13:10:00")
    assert [t for t, _ in n.update(doc(limits=[later]))] == ["Work waits until 13:10"]
    # a wait already there when the tray starts is not news
    fresh = Notices()
    assert fresh.update(doc(limits=[WAIT])) == []
