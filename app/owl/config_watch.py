"""Config edits, noticed and read off the engine thread.

Why a thread of its own: reading a file can block for as long as the file
system likes (a hung network home), and the engine must never wait on
anything but its queue. This thread looks at the file's mtime every second,
reads and checks a changed file, and hands the engine the result as an
event: a new Config, or the one line saying why it was not applied.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from owl import config as configmod

log = logging.getLogger("owl.config")

EVERY = 1.0


def mtime(path: Path) -> int | None:
    """The file's mtime in ns, None if there is none (stat does not open it,
    so a FIFO does not block here)."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


class ConfigWatch:
    """Calls ``deliver(cfg, None)`` or ``deliver(None, problem)`` after each edit."""

    def __init__(self, path: Path, deliver: Callable[[configmod.Config | None, str | None], None],
                 *, every: float = EVERY, seen: int | None = None) -> None:
        self.path = path
        self.deliver = deliver
        self.every = every
        self._seen = seen
        self._stop = threading.Event()
        self._looking = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="owl-config", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.look()

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
