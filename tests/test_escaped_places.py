"""Work handed to launchd is named; Apple's and the person's own apps and
updaters, which launchd starts as the person all day, are not.

The places are macOS's; the processes are real ones, started leading a
session of their own as launchd's children do, from copies of /bin/sleep laid
where each kind of program lives (the home is the test's own)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psutil
import pytest
from owl.tree import escaped
from owlproc import wait_for

HOME = "/Users/me"


@pytest.mark.parametrize(
    "exe",
    [
        "/Applications/Safari.app/Contents/MacOS/Safari",
        "/Applications/Slack.app/Contents/Frameworks/Squirrel.framework/Resources/ShipIt",
        "/Applications/Zoom.app/Contents/XPCServices/ZoomUpdate.xpc/Contents/MacOS/ZoomUpdate",
        "/System/Library/CoreServices/Finder.app/Contents/MacOS/Finder",
        "/System/Library/PrivateFrameworks/X.framework/XPCServices/Y.xpc/Contents/MacOS/Y",
        "/usr/libexec/trustd",
        "/usr/sbin/cfprefsd",
        "/Library/Application Support/Adobe/ARMDC/ARMDCHelper",
        "/Library/PrivilegedHelperTools/com.docker.vmnetd",
        f"{HOME}/Applications/Chrome Apps.localized/Docs.app/Contents/MacOS/app_mode_loader",
        f"{HOME}/Library/Google/GoogleSoftwareUpdate/GoogleSoftwareUpdate.bundle/Contents/"
        "Resources/GoogleSoftwareUpdateAgent.app/Contents/MacOS/GoogleSoftwareUpdateAgent",
        f"{HOME}/Library/Application Support/Foo/Sparkle.framework/Versions/B/Autoupdate",
    ],
)
def test_apples_and_the_persons_apps_and_updaters_are_not_escapes(exe):
    assert escaped.apps_own(exe, HOME)


@pytest.mark.parametrize(
    "exe",
    [
        "/bin/sh",  # launchctl submit -- /bin/sh -c ...
        "/opt/homebrew/Cellar/redis/7.2/bin/redis-server",  # brew services
        "/usr/local/bin/node",
        f"{HOME}/code/api/server",
        f"{HOME}/Library/Caches/x/Evil.app/Contents/MacOS/Evil",  # the Runs write caches
        f"{HOME}/Library/Application Support/owl/worktrees/job-1/Build.app/Contents/MacOS/B",
        f"{HOME}/Library/LaunchAgents/run.sh",
        "/private/tmp/Evil.app/Contents/MacOS/Evil",
        f"{HOME}/Autoupdate",
    ],
)
def test_work_a_run_could_have_put_there_is_named(exe):
    assert not escaped.apps_own(exe, HOME)


def _start(exe: Path, strays: list[int]) -> int:
    exe.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2("/bin/sleep", exe)
    p = subprocess.Popen([str(exe), "300"], env={}, start_new_session=True)
    strays.append(p.pid)
    wait_for(lambda: psutil.Process(p.pid).cmdline(), what="the new command line")
    return p.pid


def test_a_real_process_from_the_persons_app_is_left_out_and_one_from_caches_named(
    tmp_path, monkeypatch
):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    strays: list[int] = []
    try:
        app = _start(home / "Applications/Notes2.app/Contents/MacOS/Notes2", strays)
        updater = _start(
            home / "Library/Application Support/Foo/Sparkle.framework/Versions/B/Autoupdate",
            strays,
        )
        work = _start(home / "Library/Caches/tool/worker", strays)
        assert escaped.looks_escaped(app) is None
        assert escaped.looks_escaped(updater) is None
        said = escaped.looks_escaped(work)
        assert said is not None and "worker 300" in said
    finally:
        for pid in strays:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
