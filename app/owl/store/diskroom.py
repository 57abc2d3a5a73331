"""Room on the disk kept back for the records that must not be lost.

When the disk fills (an agent writing without end, another program), SQLite
cannot commit, and the end of a Run could not be written: `owl jobs` would
show it running long after it ended. So Owl keeps a small file of its own
beside the database while there is room, and gives it up at the moment a
record is refused for want of space: the record is written into the space it
held. The file is made again once there is room.

What still cannot be written is kept in memory by the engine, with the time
the Run ended, and written when there is room.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger("owl.diskroom")

RESERVE = 512 * 1024  # enough for many records in SQLite's write-ahead log
SPARE = 4 * 1024 * 1024  # the reserve is only made while this much more is free
NAME = ".owl-room"
# A new Job is refused when the database's disk has less than this free: what
# is left is for the live Runs' records (and their logs), not for more work.
MIN_FREE = 1024 * 1024


class Reserve:
    """The kept-back space: one file of RESERVE bytes in `folder`."""

    def __init__(self, folder: Path, size: int = RESERVE) -> None:
        self.path = Path(folder) / NAME
        self.size = size

    def ensure(self) -> bool:
        """Make the file if it is not there and the disk has room; True if it is there."""
        try:
            if self.path.stat().st_size >= self.size:
                return True
        except FileNotFoundError:
            pass
        except OSError:
            return False
        try:
            st = os.statvfs(self.path.parent)
        except OSError:
            return False
        if st.f_bavail * st.f_frsize < self.size + SPARE:
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                block = b"\0" * 65536
                left = self.size
                while left > 0:
                    left -= os.write(fd, block[:left])
                os.fsync(fd)
            finally:
                os.close(fd)
            return True
        except OSError:
            self.path.unlink(missing_ok=True)
            return False

    def release(self) -> bool:
        """Give the space back to the disk; True if there was any to give."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError as e:
            log.warning("cannot free %s: %s", self.path, e)
            return False
        log.warning(
            "the disk is full: the room kept at %s is given up for Owl's records", self.path
        )
        return True


def write(reserve: Reserve | None, record: Callable[[], Any]) -> Any:
    """`record()`, a write to the database; refused for want of space, it is
    tried once more after the reserve is given up."""
    try:
        return record()
    except sqlite3.OperationalError as e:
        if reserve is None or not _full(e) or not reserve.release():
            raise
    return record()


def _full(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "full" in text or "disk i/o" in text


def disk_full(folder: Path) -> str | None:
    """Why no new Job may be queued for want of disk room under `folder`, or None."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE:
        return (
            f"the disk holding {folder} is full ({free // 1024} KB free): no new Jobs "
            "until there is room; live Runs go on"
        )
    return None
