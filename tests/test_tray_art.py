"""The tray's look and words, from hand-written status documents (no display)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from PIL import Image, ImageChops, ImageStat

from owl.tray.art import STATES, draw_app_icon, draw_icon, grace_progress, icon_state, tooltip
from owl.tray.items import Action, find
from owl.tray.menu import build_menu, counting_down
from owl.tray.wording import clock, outcome_word, span, status_line
from owl.tray.notices import Notices

SIZES = [16, 22, 24, 32, 48]
ALL_SIZES = sorted(set(SIZES + [2 * s for s in SIZES]))

BASE: dict[str, Any] = {
    "version": "0.1.0",
    "machine": {
        "idle": False,
        "idle_for_s": 12.0,
        "on_ac_power": True,
        "reason": "in use",
        "idle_in_s": 360.0,
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
    for key, value in changes.items():
        if key == "machine":
            d["machine"].update(value)
        else:
            d[key] = value
    return d


def run(state: str = "running", **extra: Any) -> dict[str, Any]:
    r = {
        "id": 7,
        "job_id": 12,
        "title": "Fix the flaky test",
        "state": state,
        "frozen_by": None,
        "grace_left_s": None,
        "running_for_s": 250.0,
        "pids": [4242],
    }
    r.update(extra)
    return r


def job(
    id: int = 13,
    position: int = 1,
    state: str = "pending",
    worktree: str | None = None,
    title: str = "Write the docs",
) -> dict[str, Any]:
    return {
        "id": id,
        "position": position,
        "state": state,
        "title": title,
        "project": "/src/app",
        "worktree": worktree,
    }


def recent(
    outcome: str, ended_by: str, run_id: int = 6, log: str | None = "/logs/6.log"
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "job_id": 11,
        "title": "Bump the deps",
        "outcome": outcome,
        "ended_by": ended_by,
        "reason": None,
        "ended_at": "2026-01-01T10:00:00Z",
        "log": log,
    }


def frozen(left: float = 822.0, by: str = "machine") -> dict[str, Any]:
    return run("frozen", frozen_by=by, grace_left_s=left if by == "machine" else None)


def freezing(left: float = 822.0) -> dict[str, Any]:
    """A Run whose freeze left two of its processes running."""
    stuck = [{"pid": 4242, "command": "sleep 600", "why": "Owl could not signal it: Too many"}]
    return dict(frozen(left), state="freezing", not_stopped=stuck * 2)


def labels(items) -> list[str]:
    return [i.label for i in items if not i.separator]


# ---------------------------------------------------------------- the art


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("size", ALL_SIZES)
def test_every_state_renders_at_every_size(state: str, size: int) -> None:
    img = draw_icon(state, size, 0.5 if state == "frozen" else None)
    assert img.size == (size, size) and img.mode == "RGBA"
    alpha = img.getchannel("A")
    assert alpha.getbbox() is not None, "the icon is empty"
    # The owl fills most of its square and leaves the corners clear.
    opaque = sum(alpha.histogram()[129:])
    assert opaque > 0.4 * size * size
    assert alpha.getpixel((0, size - 1)) < 64 and alpha.getpixel((size - 1, size - 1)) < 64


def _difference(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference of two RGBA images, 0..255."""
    return sum(ImageStat.Stat(ImageChops.difference(a, b)).mean) / 4


@pytest.mark.parametrize("size", [16, 22, 32])
def test_states_differ_pairwise(size: int) -> None:
    images = {s: draw_icon(s, size, 0.5 if s == "frozen" else None) for s in STATES}
    for a, b in itertools.combinations(STATES, 2):
        assert _difference(images[a], images[b]) > 8, f"{a} and {b} look alike at {size} px"


@pytest.mark.parametrize("size", [16, 22, 32])
def test_states_differ_in_shape_not_only_colour(size: int) -> None:
    # Greyscale removes hue: what is left is shape (and lightness).
    grey = {s: draw_icon(s, size, 0.5).convert("LA") for s in STATES}
    for a, b in itertools.combinations(STATES, 2):
        diff = ImageChops.difference(grey[a], grey[b]).getchannel(0)
        assert ImageStat.Stat(diff).mean[0] > 4, f"{a}/{b} differ only in colour"


def test_frozen_ring_shows_the_grace_window_passing() -> None:
    early, late = draw_icon("frozen", 22, 0.1), draw_icon("frozen", 22, 0.9)
    assert _difference(early, late) > 3
    assert draw_icon("frozen", 22, None) == draw_icon("frozen", 22, 0.0)
    assert draw_icon("frozen", 22, 1.5) == draw_icon("frozen", 22, 1.0)


def test_bad_state_and_size_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown icon state"):
        draw_icon("sleepy", 22)
    with pytest.raises(ValueError):
        draw_icon("idle", 4)


def test_app_icon_is_its_own_owl() -> None:
    app = draw_app_icon(48)
    assert app.size == (48, 48)
    assert all(_difference(app, draw_icon(s, 48, 0.5)) > 5 for s in STATES)


# -------------------------------------------------------- status -> icon state


@pytest.mark.parametrize(
    "status, expected",
    [
        (doc(), ("idle", None)),
        (doc(queue=[job()]), ("waiting", None)),
        (doc(queue=[job(state="active")]), ("idle", None)),
        (doc(runs=[run()]), ("working", None)),
        (doc(runs=[run("ending")]), ("working", None)),
        (doc(runs=[run("verifying")]), ("working", None)),
        (doc(paused=True, queue=[job()]), ("paused", None)),
        (doc(runs=[frozen(by="user")]), ("paused", None)),
        (doc(attention="Run 6 of job 11 was killed", queue=[job()]), ("attention", None)),
        (doc(config_problem="config.toml: idle.after: not a duration"), ("attention", None)),
        (doc(machine={"problem": "input cannot be read"}), ("attention", None)),
        (doc(runs=[run()], attention="Run 6 failed"), ("working", None)),
        (doc(paused=True, runs=[frozen(450.0)]), ("frozen", 0.5)),
        (doc(runs=[frozen(None)]), ("frozen", None)),
        (doc(runs=[freezing(), frozen(450.0)]), ("attention", None)),
    ],
)
def test_icon_state(status: dict, expected: tuple) -> None:
    state, progress = icon_state(status)
    assert state == expected[0]
    if expected[1] is None:
        assert progress is None
    else:
        assert progress == pytest.approx(expected[1])


def test_the_frozen_run_nearest_its_end_sets_the_ring() -> None:
    status = doc(runs=[frozen(800.0), dict(frozen(90.0), id=8, job_id=13)])
    assert icon_state(status, 900.0) == ("frozen", pytest.approx(0.9))


def test_grace_progress_prefers_the_runs_own_window() -> None:
    assert grace_progress(dict(frozen(30.0), grace_window_s=60.0), 900.0) == pytest.approx(0.5)
    assert grace_progress(frozen(0.0), 0.0) is None
    assert grace_progress(frozen(-5.0), 900.0) == 1.0


def test_tooltip_says_the_state_and_what_needs_attention() -> None:
    assert tooltip(doc()) == "Owl: Nothing to do"
    assert tooltip(doc(runs=[frozen(822.0)])) == "Owl: Frozen · 13m 42s left"
    assert (
        tooltip(doc(attention="Run 6 of job 11 was killed"))
        == "Owl: Nothing to do\nRun 6 of job 11 was killed"
    )


# ------------------------------------------------------------ the status line


@pytest.mark.parametrize(
    "status, line",
    [
        (doc(), "Nothing to do"),
        (doc(runs=[run()]), "Working on job 12 · 4m"),
        (doc(runs=[run("verifying")]), "Checking job 12 · 4m"),
        (doc(runs=[run(), dict(run(), id=8, job_id=13)]), "Working on 2 jobs"),
        (doc(runs=[run("ending")]), "Ending"),
        (doc(runs=[frozen(822.0)]), "Frozen · 13m 42s left"),
        (doc(runs=[frozen(by="user")]), "Frozen"),
        (doc(paused=True, runs=[frozen(by="user")]), "Paused"),
        (doc(paused=True), "Paused"),
        (doc(queue=[job()]), "Idle in 6m"),
        (
            doc(
                queue=[job()],
                machine={"reason": "on battery", "on_ac_power": False, "idle_in_s": None},
            ),
            "Waiting: on battery",
        ),
        (
            doc(queue=[job()], machine={"reason": "input cannot be read: no X", "idle_in_s": None}),
            "Waiting: input cannot be read: no X",
        ),
        (
            doc(
                queue=[job()], machine={"idle": True, "reason": None}, waiting="project cap reached"
            ),
            "Waiting: project cap reached",
        ),
        (doc(queue=[job()], machine={"idle": True, "reason": None}), "Waiting: starting soon"),
        (
            doc(
                queue=[job()],
                shift={"ends_at": "x", "left_s": 1800.0, "until_empty": False, "ended": False},
            ),
            "Working shift · starting",
        ),
    ],
)
def test_status_line(status: dict, line: str) -> None:
    assert status_line(status) == line


def test_time_words() -> None:
    assert (
        clock(822) == "13m 42s"
        and clock(3723) == "1h 2m"
        and clock(-4) == "0s"
        and clock(None) == "0s"
    )
    assert clock(0.3) == "1s"  # a countdown shows no "0s" while time is left
    assert span(40) == "40s" and span(250) == "4m" and span(3900) == "1h 5m"


# ------------------------------------------------------------------ the menu


def test_menu_for_nothing_to_do() -> None:
    items = build_menu(doc())
    assert labels(items) == [
        "Nothing to do",
        "Start",
        "Pause",
        "Work for 1 hour",
        "Stop",
        "Jobs (0)",
        "Start at login",
        "Open config",
        "Quit",
    ]
    assert items[0].default and not items[0].enabled
    assert not find(items, "Start").enabled and not find(items, "Stop").enabled
    assert find(items, "Pause").action == Action("verb", verb="pause")
    assert find(items, "Work for 1 hour").action.kwargs == {"for_s": 3600.0}
    jobs = find(items, "Jobs (0)")
    assert labels(jobs.submenu) == ["No jobs queued"] and not jobs.submenu[0].enabled
    assert find(items, "Start at login").checked is False
    assert find(items, "Start at login").action.kwargs == {"on": True}
    assert (
        find(items, "Quit").action.kind == "quit"
        and find(items, "Open config").action.kind == "config"
    )


def test_menu_with_start_at_login_on_offers_to_turn_it_off() -> None:
    item = find(build_menu(doc(), autostart_on=True), "Start at login")
    assert item.checked is True and item.action.kwargs == {"on": False}


def test_menu_while_working() -> None:
    status = doc(
        runs=[run()], queue=[job(12, 1, "active", "/w/12", "Fix the flaky test"), job(13, 2)]
    )
    items = build_menu(status)
    assert "Job 12: Fix the flaky test — running · 4m" in labels(items)
    assert find(items, "Start").enabled and find(items, "Stop").enabled
    assert find(items, "Stop").action.kwargs == {"force": True}  # as owl stop: now
    jobs = find(items, "Jobs (2)")
    first, second = jobs.submenu
    assert first.label == "1. Fix the flaky test — running"
    assert second.label == "2. Write the docs — pending"
    assert labels(first.submenu) == [
        "Job 12 · /src/app",
        "Open worktree",
        "Show log",
        "Drop (stops its Run)",
    ]
    assert first.submenu[1].action == Action("open", path="/w/12")
    assert first.submenu[3].action.kwargs == {"job_id": 12, "force": True}
    assert not second.submenu[1].enabled  # no worktree yet
    assert second.submenu[3].label == "Drop" and second.submenu[3].action.kwargs == {
        "job_id": 13,
        "force": False,
    }


def test_live_runs_open_their_log_and_name_their_check() -> None:
    status = doc(
        runs=[
            dict(run(), log="/logs/7.log"),
            dict(run("verifying"), id=8, job_id=13, check="tests"),
        ],
        queue=[job(12, 1, "active")],
    )
    items = build_menu(status)
    live = find(items, "Job 12: Fix the flaky test — running · 4m")
    assert live.enabled and live.action == Action("open", path="/logs/7.log")
    checking = find(items, "Job 13: Fix the flaky test — checking tests")
    assert checking is not None and not checking.enabled
    assert find(items, "Show log").action.path == "/logs/7.log"


def test_menu_while_frozen_and_ending() -> None:
    items = build_menu(
        doc(runs=[frozen(65.0), dict(run("ending"), id=8, job_id=13, title="Other")])
    )
    assert labels(items)[:3] == [
        "Frozen · 1m 5s left",
        "Job 12: Fix the flaky test — frozen · 1m 5s left",
        "Job 13: Other — ending",
    ]
    assert find(items, "Stop").enabled


def test_menu_when_paused_offers_resume_and_no_start() -> None:
    items = build_menu(doc(paused=True, queue=[job()], runs=[frozen(by="user")]))
    assert find(items, "Resume").action == Action("verb", verb="resume")
    assert find(items, "Pause") is None
    assert not find(items, "Start").enabled
    assert "Job 12: Fix the flaky test — paused" in labels(items)
    # the daemon gives a paused Run's countdown too: the menu shows it
    held = run("frozen", frozen_by="user", grace_left_s=65.0)
    items = build_menu(doc(paused=True, queue=[job()], runs=[held]))
    assert "Job 12: Fix the flaky test — paused · 1m 5s left" in labels(items)


def test_menu_shows_shift_and_problems() -> None:
    items = build_menu(
        doc(
            shift={"ends_at": "x", "left_s": 2700.0, "until_empty": False, "ended": False},
            attention="Run 6 failed",
            config_problem="bad key",
            machine={"problem": "input cannot be read"},
        )
    )
    assert labels(items)[1:5] == [
        "Shift · 45m left",
        "⚠ Run 6 failed",
        "⚠ bad key",
        "⚠ input cannot be read",
    ]
    until_empty = build_menu(
        doc(shift={"ends_at": "x", "left_s": 0, "until_empty": True, "ended": False})
    )
    assert labels(until_empty)[1] == "Shift · until the queue is empty"
    ended = build_menu(
        doc(shift={"ends_at": "x", "left_s": 0, "until_empty": False, "ended": True})
    )
    assert not any(label.startswith("Shift") for label in labels(ended))


@pytest.mark.parametrize(
    "outcome, ended_by, word",
    [
        ("succeeded", "exit", "succeeded"),
        ("failed", "exit", "failed"),
        ("interrupted", "sigterm", "interrupted"),
        ("interrupted", "sigkill", "killed"),
    ],
)
def test_recent_runs_say_how_they_ended(outcome: str, ended_by: str, word: str) -> None:
    entry = recent(outcome, ended_by)
    assert outcome_word(entry) == word
    item = next(i for i in build_menu(doc(recent=[entry])) if "Bump the deps" in i.label)
    assert item.label.endswith(f"Job 11: Bump the deps — {word} (run 6)")
    assert item.action == Action("open", path="/logs/6.log")


def test_recent_without_a_log_is_greyed_and_only_three_are_shown() -> None:
    entries = [recent("failed", "exit", run_id=i, log=None) for i in range(5)]
    shown = [i for i in build_menu(doc(recent=entries)) if "Bump" in i.label]
    assert len(shown) == 3 and not any(i.enabled for i in shown)


def test_review_and_job_log_from_recent_runs() -> None:
    status = doc(
        review=[{"id": 10, "title": "Add the CLI", "branch": "owl/job-10"}],
        queue=[job(11, 1)],
        recent=[recent("failed", "exit")],
    )
    items = build_menu(status)
    assert "◆ Job 10: Add the CLI — ready for review" in labels(items)
    show_log = find(items, "Show log")
    assert show_log.enabled and show_log.action.path == "/logs/6.log"


def test_long_titles_are_shortened() -> None:
    status = doc(runs=[dict(run(), title="A " * 60)])
    line = next(i.label for i in build_menu(status) if i.label.startswith("Job 12"))
    assert "…" in line and len(line) < 70


def test_counting_down() -> None:
    assert counting_down(doc(runs=[frozen()]))
    assert not counting_down(doc(runs=[run()])) and not counting_down(doc(runs=[frozen(by="user")]))


# -------------------------------------------------------------- notifications


def test_notices_frozen_once_per_spell_killed_once_review_once() -> None:
    n = Notices()
    old = recent("interrupted", "sigkill", run_id=1)
    assert n.update(doc(recent=[old])) == []  # what was there at start is not news
    first = n.update(doc(runs=[frozen(900.0)], recent=[old]))
    assert [t for t, _ in first] == ["Job 12 frozen"] and "15m" in first[0][1]
    assert n.update(doc(runs=[frozen(800.0)], recent=[old])) == []
    assert n.update(doc(runs=[run()], recent=[old])) == []  # thawed... still the same spell
    assert n.update(doc(runs=[frozen(700.0)], recent=[old])) == []
    n.update(doc(runs=[run()], machine={"idle": True}))  # the person left
    assert [t for t, _ in n.update(doc(runs=[frozen(900.0)]))] == ["Job 12 frozen"]
    killed = n.update(doc(recent=[recent("interrupted", "sigkill", run_id=2), old]))
    assert [t for t, _ in killed] == ["Job 11 killed"]
    assert n.update(doc(recent=[recent("interrupted", "sigterm", run_id=3)])) == []
    review = n.update(doc(review=[{"id": 10, "title": "Add the CLI", "branch": "owl/job-10"}]))
    assert review == [("Job 10 ready for review", "Add the CLI\nBranch owl/job-10")]
    assert n.update(doc(review=[{"id": 10, "title": "Add the CLI", "branch": "owl/job-10"}])) == []


def test_a_run_frozen_at_start_is_announced_and_user_pauses_are_not() -> None:
    assert [t for t, _ in Notices().update(doc(runs=[frozen()]))] == ["Job 12 frozen"]
    n = Notices()
    n.update(doc())
    assert n.update(doc(runs=[frozen(by="user")])) == []


# ----------------------------------------------- Jobs that wait for the person


def stuck(
    id: int,
    state: str = "blocked",
    run_id: int | None = 3,
    run_reason: str | None = "check unit failed (exit 4): FAILED test_parse: 2 != 3",
) -> dict[str, Any]:
    return {
        "id": id,
        "state": state,
        "title": "Add a test for floats",
        "reason": "its checks failed on every attempt",
        "worktree": "/wt/job-4",
        "run_id": run_id,
        "run_reason": run_reason,
    }


def test_jobs_that_wait_for_the_person_are_never_nothing_to_do() -> None:
    review = {
        "id": 3,
        "title": "Add the CLI",
        "branch": "owl/job-3",
        "worktree": "/wt/3",
        "base_branch": "main",
        "run_id": 5,
        "run_reason": None,
    }
    failed = dict(recent("failed", "exit", run_id=3), job_id=4)
    status = doc(review=[review], stuck=[stuck(4)], recent=[failed])
    assert status_line(status) == "2 need you"
    assert icon_state(status) == ("attention", None)
    assert tooltip(status).startswith("Owl: 2 need you")
    assert status_line(doc(stuck=[stuck(4)])) == "1 needs you"
    assert (
        status_line(doc(runs=[run()], stuck=[stuck(4)])) == "Working on job 12 · 4m · 1 needs you"
    )
    items = build_menu(status)
    got = labels(items)
    assert "Job 4 · blocked · check unit failed (exit 4) (run 3)" in got
    assert "◆ Job 3: Add the CLI — ready for review (run 5)" in got
    # the blocked Job's failed Run is not listed a second time
    assert not any(label.startswith("✗ Job 4") for label in got)
    row = find(items, "Job 4 · blocked · check unit failed (exit 4) (run 3)")
    assert row is not None and row.submenu is not None
    actions = {i.label: i.action for i in row.submenu}
    assert actions["Accept anyway"] == Action(
        "verb", verb="accept", args=(("anyway", True), ("job_id", 4))
    )
    assert actions["Run checks again"] == Action("verb", verb="verify", args=(("job_id", 4),))
    exhausted = find(
        build_menu(doc(stuck=[stuck(6, "exhausted", 9, "exit 1")])),
        "Job 6 · exhausted · exit 1 (run 9)",
    )
    assert exhausted is not None


def test_quit_of_a_joined_tray_says_it_quits_the_tray_only() -> None:
    assert "Quit" in labels(build_menu(doc()))
    joined = labels(build_menu(doc(), owns_daemon=False))
    assert "Quit tray (the daemon goes on)" in joined and "Quit" not in joined


def test_a_run_not_entirely_frozen_is_never_shown_frozen() -> None:
    items = build_menu(doc(runs=[freezing()]))
    assert labels(items)[:2] == [
        "NOT frozen: 2 processes still running",
        "Job 12: Fix the flaky test — NOT frozen: 2 processes still running",
    ]
    assert tooltip(doc(runs=[freezing()])).startswith("Owl: NOT frozen: 2 processes")
    assert find(items, "Stop").enabled


def test_runs_that_cannot_be_contained_show_on_the_icon_and_its_tooltip() -> None:
    line = (
        "Runs cannot be contained: bubblewrap is not installed (sudo apt install "
        'bubblewrap); they wait until they can (sandbox.mode = "auto" runs them uncontained)'
    )
    status = doc(attention=line)
    assert icon_state(status)[0] == "attention"
    assert tooltip(status).splitlines()[1] == line
