"""The macOS backend: psutil for listing and signalling, taskpolicy for I/O.

macOS has neither pidfds nor a child subreaper, so listing and signalling
are the portable psutil ones (psutil re-checks the create time before each
signal). Orphans go to launchd; a sweep still finds those it has seen
before, and the ProcessTree also looks among launchd's children for the
Run's tag or, where the kernel hides the environment (Apple's own
binaries), for a session or process group the Run has had (posix.Kin,
which also sweeps when a member forks, through kqueue).
"""

from __future__ import annotations

import shutil

from .posix import (  # noqa: F401  (the backend interface, re-exported)
    DEAD,
    RUNNING,
    STOPPED,
    ForkWatch,
    Handle,
    Kin,
    Stat,
    nice_prefix,
    become_subreaper,
    sweeper,
    create_time,
    environ,
    last_pid,
    set_session_nice,
    matches,
    open_handle,
    same_start,
    snapshot,
    stat,
    zombie_children,
)

NAME = "macos"


def priority_prefix(nice: int) -> list[str]:
    """``nice -n K taskpolicy -d throttle``: low CPU priority and throttled
    disk I/O (the counterpart of Linux's idle class: the Run's I/O waits
    whenever someone else's is pending), both inherited by children.

    The program path that follows is absolute, so it cannot be mistaken
    for an option of either tool.
    """
    prefix = nice_prefix(nice)
    tool = shutil.which("taskpolicy") or "/usr/sbin/taskpolicy"
    if shutil.which(tool):
        prefix += [tool, "-d", "throttle"]
    return prefix
