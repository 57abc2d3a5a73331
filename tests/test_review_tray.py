"""A Job in review, from the tray: its submenu, each item's action, and the
"ready for review" notification's Review button.

The menu model is checked as data first; then the real tray (over the
stand-in daemon of tests/traydesk.py) on Xvfb with trayer and dunst: each
item is picked with the keyboard and must reach the daemon (or the desktop's
opener, a stand-in that records what it was asked to open), and the Review
button of a real notification, pressed through dunst, must open the page.
"""

from __future__ import annotations

import pytest

from display import DisplayEnv, display_fixture
from owl.tray.items import Action, find
from owl.tray.menu import build_menu
from owl.tray.notices import Notices
from traydesk import (
    ARTIFACTS,
    IDLE,
    Tray,
    choose,
    close_menus,
    doc,
    dunst,
    fresh_tray_fixture,
    opened,
    screenshot,
    stand_in_tray_fixture,
    wait_for,
    walk_menu,
)

LABEL = "◆ Job 12: Add a greet() function — ready for review"


def review_doc(worktree: str, page: str, base: str | None = "main") -> dict:
    return doc(
        review=[
            {
                "id": 12,
                "title": "Add a greet() function",
                "branch": "owl/job-12",
                "worktree": worktree,
                "base_branch": base,
            }
        ],
        _answer={"review": {"path": page}},
    )


# ------------------------------------------------------------ the model


def test_a_job_in_review_is_a_submenu_with_what_to_do_with_it() -> None:
    items = build_menu(review_doc("/wt/job-12", "/p.html"))
    entry = find(items, LABEL)
    assert entry is not None and entry.enabled and entry.submenu is not None
    assert [i.label for i in entry.submenu] == [
        "Review",
        "Open worktree",
        "Accept",
        "Merge into main",
        "Run checks again",
        "Drop",
    ]
    acts = {i.label: i.action for i in entry.submenu}
    assert acts["Review"] == Action("review", args=(("job_id", 12),))
    assert acts["Open worktree"] == Action("open", path="/wt/job-12")
    assert acts["Accept"].kwargs == {"job_id": 12} and acts["Accept"].verb == "accept"
    assert acts["Merge into main"].kwargs == {"job_id": 12, "merge": True}
    assert acts["Run checks again"].verb == "verify"
    assert acts["Drop"].kwargs == {"job_id": 12, "force": False}


def test_without_a_worktree_open_and_checks_are_greyed_and_merge_names_no_branch() -> None:
    entry = find(build_menu(review_doc("", "/p.html", base=None)), LABEL)
    by = {i.label: i for i in entry.submenu}
    assert not by["Open worktree"].enabled and not by["Run checks again"].enabled
    assert by["Merge into its base branch"].enabled


def test_the_review_notice_names_the_job_for_its_button() -> None:
    n = Notices()
    n.update(IDLE)
    [notice] = n.update(review_doc("/wt", "/p.html"))
    assert notice == ("Job 12 ready for review", "Add a greet() function\nBranch owl/job-12")
    assert notice.review == 12


# ----------------------------------------------------- the real tray, on Xvfb

desk = display_fixture(scope="module", tray=True, notify=True)
tray = stand_in_tray_fixture("review-tray")
fresh = fresh_tray_fixture()


def _paths(t: Tray) -> tuple[str, str]:
    worktree = t.folder / "job-12"
    worktree.mkdir(exist_ok=True)
    page = t.folder / "job-12.html"
    page.write_text("<!DOCTYPE html><p>review</p>")
    return str(worktree), str(page)


@pytest.mark.display
@pytest.mark.parametrize(
    "label,verb,args",
    [
        ("Accept", "accept", {"job_id": 12}),
        ("Merge into main", "accept", {"job_id": 12, "merge": True}),
        ("Run checks again", "verify", {"job_id": 12}),
        ("Drop", "drop", {"job_id": 12, "force": False}),
    ],
)
def test_each_verb_in_the_submenu_reaches_the_daemon(
    fresh: Tray, desk: DisplayEnv, label: str, verb: str, args: dict
) -> None:
    status = review_doc(*_paths(fresh))
    fresh.shows_anew(desk, status)
    choose(desk, status, LABEL, label)
    assert fresh.wait_call(verb)["args"] == args


@pytest.mark.display
def test_review_writes_the_page_and_opens_it_and_open_worktree_opens_the_folder(
    fresh: Tray, desk: DisplayEnv
) -> None:
    worktree, page = _paths(fresh)
    status = review_doc(worktree, page)
    fresh.shows_anew(desk, status)
    walk_menu(desk, status, LABEL, menus=2)
    screenshot(desk, ARTIFACTS / "menu-review.png", crop=(420, 0, 860, 300))
    close_menus(desk)
    choose(desk, status, LABEL, "Review")
    assert fresh.wait_call("review")["args"] == {"job_id": 12}
    wait_for(lambda: opened(fresh.folder) == [page], "the review page to be opened")
    choose(desk, status, LABEL, "Open worktree")
    wait_for(lambda: opened(fresh.folder) == [page, worktree], "the worktree to be opened")


@pytest.mark.display
def test_the_ready_for_review_notification_has_a_review_button_that_opens_the_page(
    fresh: Tray, desk: DisplayEnv
) -> None:
    worktree, page = _paths(fresh)
    fresh.shows_anew(desk, doc())
    dunst(desk, "close-all")
    status = review_doc(worktree, page)
    status["review"][0]["id"] = 14  # a Job new to this tray: announced
    status["review"][0].update(title="Make the greeting configurable", branch="owl/job-14")
    fresh.shows_anew(desk, status)
    wait_for(
        lambda: int(dunst(desk, "count", "displayed") or 0) > 0, "the ready-for-review notification"
    )
    history = dunst(desk, "history")
    assert "Job 14 ready for review" not in history  # still showing, not yet in history
    screenshot(desk, ARTIFACTS / "notification-review.png", crop=(640, 0, 640, 200))
    dunst(desk, "action", "0")  # the person clicks it
    assert fresh.wait_call("review")["args"] == {"job_id": 14}
    wait_for(lambda: opened(fresh.folder) == [page], "the review page to be opened")
