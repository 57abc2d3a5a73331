"""The one-daemon lock of an Owl home, beside its database, on strings and `os`.

One daemon per home, whatever the environment says: the lock lives with the
data it guards (`owl.lock` beside `owl.db`), not with the socket, whose
folder moves with XDG_RUNTIME_DIR, TMPDIR and the desktop. Two shells of one
person that see different runtime folders still meet at the same lock.

The daemon holds it (flock) for as long as it runs and writes three lines in
it: its pid, the socket it listens on, and `starting`, `ready` or `stopping`. A command
whose own idea of the socket finds nobody reads those lines to find the
daemon that does run (`owl.control.locate`). Light on purpose: every `owl`
call that finds no daemon reads it.
"""

from __future__ import annotations

import fcntl
import os

LOCK_NAME = "owl.lock"
STARTING, READY, STOPPING = "starting", "ready", "stopping"


def path_in(data_dir: str) -> str:
    """The lock of the home whose database lives in `data_dir`."""
    return os.path.join(data_dir, LOCK_NAME)


class Holder:
    """What a held lock says of the daemon holding it."""

    __slots__ = ("pid", "socket", "state")

    def __init__(self, pid: int | None, socket: str, state: str) -> None:
        self.pid, self.socket, self.state = pid, socket, state

    def alive(self) -> bool:
        """Whether the named daemon is a live process. A lock held with its
        daemon dead is its watchdog ending that daemon's Runs (or a command
        queueing a Job by itself): no daemon, and one soon free to start."""
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not _zombie(self.pid)

    def naming(self) -> str:
        """ "pid 123, socket /run/user/1000/owl/owl.sock" for one-line messages."""
        return f"pid {self.pid if self.pid is not None else 'unknown'}, socket {self.socket or 'unknown'}"


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (Linux's state Z): a
    daemon that ended under a parent that does not reap (a container's first
    process) still answers ``kill(pid, 0)``, and its lock file still names it
    in the instant the next daemon has taken the lock and not yet written it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(512)
    except OSError:
        return False  # no /proc (macOS): the signal's answer stands
    return stat.rpartition(b")")[2].split()[:1] == [b"Z"]


def holder(lock: str) -> Holder | None:
    """The lock's holder, or None when nobody holds it (or it does not exist).

    Asked with a shared lock taken and let go at once: a daemon that tries for
    it in that instant waits a moment (see `take`), and nothing is created."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None  # free: closing the file lets go of it
        except BlockingIOError:
            pass
        return parse(os.read(fd, 4096).decode(errors="replace"))
    finally:
        os.close(fd)


def parse(text: str) -> Holder:
    """The holder the lock file's lines name (a damaged file names nobody known)."""
    lines = [*text.splitlines(), "", "", ""]
    pid_text = lines[0].strip()
    pid = int(pid_text) if pid_text.isascii() and pid_text.isdigit() else None
    return Holder(pid, lines[1].strip(), lines[2].strip())


def record(fd: int, pid: int, socket: str, state: str) -> None:
    """Write what a client needs into the held lock's file."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{pid}\n{socket}\n{state}\n".encode(), 0)


def take_now(fd: int, wait: float = 0.5) -> bool:
    """Take the lock exclusively for a command that must not wait on a daemon
    (queueing a Job by itself, recovering the database): True once taken,
    False while another holds it. Another command's look holds it for an
    instant, so that much is waited out."""
    import time

    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
