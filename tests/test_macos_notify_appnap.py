"""Notifications attributed to Owl.app and the App Nap opt-out, over stand-in PyObjC."""

from __future__ import annotations

import importlib
import time
import sys
import types
from pathlib import Path

import pytest

from owl.power import appnap
from owl.tray.app import TrayApp
from owl.tray.darwin_notify import BundleNotifier, make_notifier
from test_bundle import make_bundle

FAKES = Path(__file__).resolve().parent / "support" / "fake_pyobjc"
FAKE_NAMES = ("_fake_runloop", "Foundation", "UserNotifications")


@pytest.fixture
def pyobjc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The stand-in modules, loaded afresh and taken away again afterwards."""
    log = tmp_path / "pyobjc.log"
    monkeypatch.setenv("FAKE_PYOBJC_LOG", str(log))
    monkeypatch.syspath_prepend(str(FAKES))
    for name in FAKE_NAMES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    mods = types.SimpleNamespace(**{n: importlib.import_module(n) for n in FAKE_NAMES[1:]})
    mods.said = lambda: log.read_text().splitlines() if log.exists() else []
    yield mods
    for name in FAKE_NAMES:
        sys.modules.pop(name, None)


def test_outside_a_bundle_osascript_is_used(pyobjc) -> None:
    assert (
        make_notifier(
            un=pyobjc.UserNotifications,
            foundation=pyobjc.Foundation,
            executable="/usr/local/bin/python3.12",
        )
        is None
    )


def test_inside_owl_app_notifications_go_through_the_center(pyobjc, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_BUNDLE_ID", "dev.owl")
    app = make_bundle(tmp_path)
    n = make_notifier(
        un=pyobjc.UserNotifications,
        foundation=pyobjc.Foundation,
        executable=str(app / "Contents" / "MacOS" / "python"),
    )
    assert isinstance(n, BundleNotifier) and n.allowed is True
    un = pyobjc.UserNotifications
    assert (
        f"requestAuthorization {un.UNAuthorizationOptionAlert | un.UNAuthorizationOptionSound} True"
        in pyobjc.said()
    )
    assert n.notify("Job 3 frozen", "It stops in 15:00")
    assert n.notify("Job 4 ready for review", "Branch owl/job-4")
    assert [ln for ln in pyobjc.said() if ln.startswith("notification")] == [
        "notification owl-1 Job 3 frozen | It stops in 15:00",
        "notification owl-2 Job 4 ready for review | Branch owl/job-4",
    ]


def test_a_bundle_without_an_identifier_uses_osascript(pyobjc, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("FAKE_BUNDLE_ID", raising=False)
    app = make_bundle(tmp_path)
    assert (
        make_notifier(
            un=pyobjc.UserNotifications,
            foundation=pyobjc.Foundation,
            executable=str(app / "Contents" / "MacOS" / "python"),
        )
        is None
    )


class _Icon:
    def __init__(self) -> None:
        self.shown: list[tuple[str, str]] = []

    def notify(self, message: str, title: str) -> None:
        self.shown.append((title, message))


def test_refused_permission_falls_back_to_osascript(pyobjc, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_BUNDLE_ID", "dev.owl")
    monkeypatch.setenv("FAKE_UN_GRANTED", "0")
    app = make_bundle(tmp_path)
    n = make_notifier(
        un=pyobjc.UserNotifications,
        foundation=pyobjc.Foundation,
        executable=str(app / "Contents" / "MacOS" / "python"),
    )
    assert n is not None and n.allowed is False
    tray = types.SimpleNamespace(_bundle_notifier=n, icon=_Icon())
    TrayApp._notify(tray, "Job 1 killed", "it did not end")  # type: ignore[arg-type]
    assert tray.icon.shown == [("Job 1 killed", "it did not end")]
    assert not [ln for ln in pyobjc.said() if ln.startswith("notification")]


def test_the_tray_prefers_the_bundle_notifier(pyobjc, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_BUNDLE_ID", "dev.owl")
    app = make_bundle(tmp_path)
    n = make_notifier(
        un=pyobjc.UserNotifications,
        foundation=pyobjc.Foundation,
        executable=str(app / "Contents" / "MacOS" / "python"),
    )
    tray = types.SimpleNamespace(_bundle_notifier=n, icon=_Icon())
    TrayApp._notify(tray, "Job 2 frozen", "goes on when you step away")  # type: ignore[arg-type]
    assert tray.icon.shown == []
    assert "notification owl-1 Job 2 frozen | goes on when you step away" in pyobjc.said()


def test_app_nap_opt_out_keeps_timers_but_allows_sleep(pyobjc) -> None:
    f = pyobjc.Foundation
    activity = appnap.begin(foundation=f)
    assert activity is not None
    (line,) = pyobjc.said()
    assert line.startswith(
        f"beginActivityWithOptions_reason_ {hex(f.NSActivityUserInitiatedAllowingIdleSystemSleep)} "
    )
    assert "timers" in line
    assert (
        not f.NSActivityUserInitiatedAllowingIdleSystemSleep & f.NSActivityIdleSystemSleepDisabled
    )
    activity.end()
    activity.end()
    assert pyobjc.said().count("endActivity_") == 1


def test_no_app_nap_work_off_macos() -> None:
    assert sys.platform != "darwin"
    assert appnap.begin() is None


def _bundled(pyobjc, tmp_path: Path, monkeypatch, **center) -> tuple[BundleNotifier, list]:
    monkeypatch.setenv("FAKE_BUNDLE_ID", "dev.owl")
    for key, value in center.items():
        setattr(pyobjc.UserNotifications._CENTER, key, value)
    by_osascript: list[tuple[str, str]] = []
    app = make_bundle(tmp_path)
    n = make_notifier(
        un=pyobjc.UserNotifications,
        foundation=pyobjc.Foundation,
        executable=str(app / "Contents" / "MacOS" / "python"),
        fallback=lambda t, m: by_osascript.append((t, m)),
    )
    assert n is not None
    return n, by_osascript


def test_notices_wait_for_the_persons_answer_then_are_posted(pyobjc, tmp_path, monkeypatch) -> None:
    n, by_osascript = _bundled(pyobjc, tmp_path, monkeypatch, defer=True)
    assert n.allowed is None
    assert n.notify("Job 1 frozen", "stops in 15:00") and n.notify("Job 2 ready", "review")
    assert not [ln for ln in pyobjc.said() if ln.startswith("notification")]
    pyobjc.UserNotifications._CENTER.answer(True)
    assert [ln for ln in pyobjc.said() if ln.startswith("notification")] == [
        "notification owl-1 Job 1 frozen | stops in 15:00",
        "notification owl-2 Job 2 ready | review",
    ]
    assert by_osascript == []


def test_notices_held_for_a_no_go_through_osascript(pyobjc, tmp_path, monkeypatch) -> None:
    n, by_osascript = _bundled(pyobjc, tmp_path, monkeypatch, defer=True)
    n.notify("Job 1 frozen", "stops in 15:00")
    pyobjc.UserNotifications._CENTER.answer(False)
    assert by_osascript == [("Job 1 frozen", "stops in 15:00")]
    assert not n.notify("Job 2 ready", "review"), "later ones: the caller's osascript"


def test_notices_held_with_no_answer_go_through_osascript_in_time(
    pyobjc, tmp_path, monkeypatch
) -> None:
    n, by_osascript = _bundled(pyobjc, tmp_path, monkeypatch, defer=True)
    n._answer_wait = 0.05
    n.notify("Job 1 frozen", "stops in 15:00")
    deadline = time.monotonic() + 5
    while not by_osascript and time.monotonic() < deadline:
        time.sleep(0.01)
    assert by_osascript == [("Job 1 frozen", "stops in 15:00")]


def test_a_post_the_center_refuses_goes_through_osascript(pyobjc, tmp_path, monkeypatch) -> None:
    """An ad-hoc-signed Owl.app is told yes, then refused at the post."""
    n, by_osascript = _bundled(pyobjc, tmp_path, monkeypatch, refuse_posts="UNErrorDomain 1")
    assert n.allowed is True
    assert n.notify("Job 1 killed", "it did not end")
    assert by_osascript == [("Job 1 killed", "it did not end")]
    assert not n.notify("Job 2 ready", "review")  # straight to the caller's osascript
    pyobjc.UserNotifications._CENTER.refuse_posts = None


def test_outside_a_bundle_osascript_runs_off_the_run_loop(tmp_path, monkeypatch) -> None:
    """pystray's darwin notify waits for osascript on the thread that asks (the
    run loop's); Owl's starts it on a thread of its own."""
    import threading

    from owl.tray import darwin_notify

    ran: list[tuple[list[str], str]] = []
    done = threading.Event()

    def fake_run(argv, **kw):
        ran.append((argv, threading.current_thread().name))
        done.set()

    monkeypatch.setattr(darwin_notify.subprocess, "run", fake_run)
    assert darwin_notify.OsascriptNotifier().notify('Job "1"', "frozen \\ now")
    assert done.wait(5)
    ((argv, thread),) = ran
    assert argv == [
        "osascript",
        "-e",
        'display notification "frozen \\\\ now" with title "Job \\"1\\""',
    ]
    assert thread == "owl-osascript"
