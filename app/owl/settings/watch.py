"""Config edits, noticed and read off the engine thread.

Why a thread of its own: reading a file can block for as long as the file
system likes (a hung network home), and the engine must never wait on
anything but its queue. This thread reads and checks a changed file and
hands the engine the result as an event: a new Config, or the one line
saying why it was not applied.

How it learns of an edit: on Linux, inotify on the file's folder (an editor
writes a new file and renames it over the old one, so watching the file
itself would lose it after the first save): the thread sleeps in `select`
until the kernel says something in the folder changed, so a daemon with
nothing to do is not woken once a second for a file nobody touches. Where
inotify cannot be had (macOS, a folder that does not exist yet, the
per-user watch limit reached) it looks at the file's mtime every second, as
before. Either way the mtime is what decides whether the file changed.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from owl.settings import config as configmod

log = logging.getLogger("owl.config")

EVERY = 1.0
SETTLE = 0.05  # quiet this long after an inotify event before the file is read

# inotify(7): what in the folder may mean the config changed.
_IN_ATTRIB, _IN_CLOSE_WRITE = 0x004, 0x008
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x040, 0x080, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
# Not IN_MODIFY: a file being written (truncated, then filled) is read only once
# it is closed, never half-written; an empty file read mid-save would otherwise
# pass for a good config of defaults.
_MASK = (
    _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000


def inotify_folder(folder: Path) -> int | None:
    """An inotify descriptor watching `folder`, or None where there is none to be had."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        # the process's own symbols, libc's among them: find_library would run
        # `ldconfig -p` at every start to find the same library
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return None
        if libc.inotify_add_watch(fd, os.fsencode(folder), _MASK) < 0:
            os.close(fd)
            return None
        return int(fd)
    except (OSError, AttributeError):
        return None


def mtime(path: Path) -> int | None:
    """The file's mtime in ns, None if there is none (stat does not open it,
    so a FIFO does not block here)."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


class ConfigWatch:
    """Calls ``deliver(cfg, None)`` or ``deliver(None, problem)`` after each edit."""

    def __init__(
        self,
        path: Path,
        deliver: Callable[[configmod.Config | None, str | None], None],
        *,
        every: float = EVERY,
        seen: int | None = None,
    ) -> None:
        self.path = path
        self.deliver = deliver
        self.every = every
        self._seen = seen
        self._stop = threading.Event()
        self._looking = threading.Lock()
        self._wake: int | None = None  # written to by stop(), to end the select
        self._thread = threading.Thread(target=self._loop, name="owl-config", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        wake = self._wake
        if wake is not None:
            try:
                os.write(wake, b"x")
            except OSError:
                pass

    def _loop(self) -> None:
        fd = inotify_folder(self.path.parent)
        if fd is None:
            while not self._stop.wait(self.every):
                self.look()
            return
        r, self._wake = os.pipe()
        self.look()  # an edit made before the watch existed (since `seen` was taken)
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([fd, r], [], [])
                if self._stop.is_set():
                    break
                if fd in ready:
                    self._drain(fd)
                    # a save is several events (write, close, rename): look once
                    # they have stopped coming, within SETTLE
                    while select.select([fd], [], [], SETTLE)[0]:
                        self._drain(fd)
                    self.look()
        finally:
            os.close(fd)
            os.close(r)
            os.close(self._wake)
            self._wake = None

    @staticmethod
    def _drain(fd: int) -> None:
        """Read every queued event: which one it was does not matter, the mtime says."""
        while True:
            try:
                if not os.read(fd, 65536):
                    return
            except BlockingIOError:
                return

    def look(self, wait: float = -1) -> bool:
        """Read the file if it changed since the last look; True if it had.

        Any thread may look (a verb does, so an edit made just before it is
        in force for it). One look at a time, so an older read is never
        delivered after a newer one; with ``wait`` >= 0, give up (False) if
        another look holds on for that long (a file system that hangs)."""
        if not self._looking.acquire(timeout=wait):
            return False
        try:
            return self._look()
        finally:
            self._looking.release()

    def _look(self) -> bool:
        now = mtime(self.path)
        if now == self._seen:
            return False
        self._seen = now
        try:
            cfg = configmod.load(self.path)
        except configmod.ConfigError as e:
            self.deliver(None, str(e))
        except Exception as e:  # pragma: no cover - a bug must not end the watch
            log.exception("reading %s failed", self.path)
            self.deliver(None, f"{self.path}: cannot be read: {e}")
        else:
            self.deliver(cfg, None)
        return True
