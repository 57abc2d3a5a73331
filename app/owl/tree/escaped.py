"""Processes that left a Run through launchd: named, never claimed.

On macOS, `open -a`, `launchctl submit`, `brew services`, XPC services and
Docker Desktop have launchd start the work: a child of pid 1, in a session
of its own, without the Run's tag (launchd gives it launchd's environment),
in no session or process group the Run had. Nothing links it to the Run, so
Owl neither freezes nor ends it (it may be the person's own, or the
system's). But one that started while the Run was live, as this user, in a
new session, is named beside the processes Owl may not signal, so a person
can see what may still be working for the agent. Apple's own programs and
the person's apps start that way all day and are left out: anything under
/System, /usr/libexec, /usr/sbin, /Library, /Applications or
~/Applications (their XPC services and updaters with them), and the app
helpers and updaters apps install in ~/Library (Google's Keystone, Sparkle's
Autoupdate). Not where a Run writes (~/Library/Caches, Owl's own folder with
its worktrees, /tmp): a program there may be the Run's.

Where the daemon adopts orphans (a Linux child subreaper) nothing of a Run
reaches init, and this is never asked.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import psutil

from .untouchable import command_of

WHY = (
    "escaped to launchd (a new session under pid 1, started during the Run, not "
    "tagged): Owl cannot tell it is the Run's and does not freeze or end it"
)
# Apple's own daemons and XPC services, and the person's apps: started by launchd
# as the user all day long.
SYSTEM_PLACES = ("/System/", "/usr/libexec/", "/usr/sbin/", "/Library/", "/Applications/")
# Inside an app or framework: its helpers and services (Sparkle's Autoupdate among them).
BUNDLE_PARTS = (
    ".app/Contents/",
    ".framework/Versions/",
    ".xpc/Contents/",
)
# Updaters by name.
UPDATERS = ("Autoupdate", "GoogleSoftwareUpdateAgent", "ksfetch", "Microsoft AutoUpdate")
# Of ~/Library, what a Run writes (its caches, its worktree in Owl's folder): a program
# there may be the Run's own.
RUNS_LIBRARY = ("Library/Caches/", "Library/Application Support/owl/")


def apps_own(exe: str, home: str) -> bool:
    """Whether a program is Apple's, one of the person's apps, or an app's
    helper or updater in ~/Library: started by launchd all day, never a Run's
    work (a Run writes none of these places)."""
    if exe.startswith(SYSTEM_PLACES):
        return True
    if not home or home == "/":
        return False
    mine = home.rstrip("/") + "/"
    if not exe.startswith(mine):
        return False
    rest = exe[len(mine) :]
    if rest.startswith("Applications/"):
        return True
    if not rest.startswith("Library/") or rest.startswith(RUNS_LIBRARY):
        return False
    return any(part in rest for part in BUNDLE_PARTS) or rest.rsplit("/", 1)[-1] in UPDATERS


def looks_escaped(pid: int) -> str | None:
    """The command of a child of launchd that may be work the Run handed to
    launchd (this user's, leading a session of its own, not Apple's), else None.
    The caller has checked that it started after the Run."""
    try:
        if os.getsid(pid) != pid:
            return None
        proc = psutil.Process(pid)
        if proc.uids().real != os.getuid():
            return None
        exe = proc.exe()
    except (OSError, psutil.Error):
        return None
    if apps_own(exe, os.path.expanduser("~")):
        return None
    return command_of(pid)


def named(
    escaped: dict[tuple[int, Any], str], rows: dict[int, Any], backend: ModuleType
) -> list[dict[str, Any]]:
    """The escaped processes still live in the table `rows`, as {pid, command, why}."""
    out = []
    for (pid, start), command in escaped.items():
        row = rows.get(pid)
        if row is not None and row.state != backend.DEAD and backend.same_start(row.start, start):
            out.append({"pid": pid, "command": command, "why": WHY})
    return out
