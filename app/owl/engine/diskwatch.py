"""The free space under the live Runs, read off the engine thread, ten times a second.

Why a thread of its own, looking this often: a Run writing as fast as a
laptop's disk takes (one to three GB a second, buffered) passes the floor by
whatever it wrote since the last look. The engine's own pass comes once a
second, so a floor of 2 GB could be passed by a whole second's writes, and a
small disk filled before the freeze. Looking every LOOK seconds, the floor
holds against any writer slower than floor / LOOK (20 GB/s for the default
2 GB), faster than a laptop's disk. And statvfs is a call into a filesystem
(one on the network may hang), which the engine never waits on.

The watch is told which folders to look at (Owl's home and the live Runs'
worktrees) and the floor, by the engine on each of its passes; it tells the
engine (`changed`, which queues an event) only when a folder crosses the
floor, either way. Between looks it sleeps on an event, so with no Run live
it costs nothing.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable

from owl.rules import runcaps

log = logging.getLogger("owl.engine")

LOOK = 0.1  # seconds between two looks while a Run is live


def under(folder: str, floor: runcaps.Amount) -> str | None:
    """Why `folder`'s filesystem is under the floor, or None (also when unread)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    cap = floor.of(st.f_blocks * st.f_frsize) or 0
    return runcaps.disk_under(st.f_bavail * st.f_frsize, cap, floor.text, folder)


class DiskWatch:
    """Looks at the free space under `folders` every `look` seconds; calls
    `changed` (from its own thread) when one goes under the floor or back."""

    def __init__(self, changed: Callable[[], None], look: float = LOOK) -> None:
        self._changed = changed
        self._look = look
        self._want: tuple[tuple[str, ...], runcaps.Amount | None] = ((), None)
        self._low: dict[str, str] = {}  # replaced whole, never changed in place
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name="owl-disk", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def watch(self, folders: Iterable[str], floor: runcaps.Amount) -> None:
        """Look at these folders against this floor from now on (none: rest)."""
        want = (tuple(sorted(set(folders))), floor)
        if want != self._want:
            self._want = want
            self._wake.set()

    def low(self, folder: str) -> str | None:
        """Why `folder` is under the floor at the last look, or None."""
        return self._low.get(folder)

    def look(self) -> bool:
        """One look at every folder; True when one crossed the floor either way."""
        folders, floor = self._want
        low: dict[str, str] = {}
        if floor is not None and not floor.off:
            for folder in folders:
                why = under(folder, floor)
                if why is not None:
                    low[folder] = why
        crossed = low.keys() != self._low.keys()
        self._low = low  # the figures in the words are the newest either way
        return crossed

    def _main(self) -> None:
        while not self._stopping:
            try:
                if self.look():
                    self._changed()
            except Exception:  # a watch that dies would leave the disk unwatched
                log.exception("the disk watch's look failed")
            if self._want[0]:
                self._wake.wait(self._look)
            else:
                self._wake.wait()
            self._wake.clear()
