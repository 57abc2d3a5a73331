"""The disk watch: a real small filesystem filled and emptied under it.

It reads statvfs on a thread of its own and says only when a folder crosses
runs.disk_floor, either way (`owl.engine.diskwatch`); the engine acts on that
(test_run_caps.py's Run that fills its disk)."""

from __future__ import annotations

import threading
from pathlib import Path

from owl.engine.diskwatch import DiskWatch
from owl.rules import runcaps
from support.smalldisk import small_fs

FLOOR = runcaps.amount("4M")


def fill(folder: Path, mib: int) -> Path:
    big = folder / "big.bin"
    big.write_bytes(b"\1" * mib * 1024 * 1024)
    return big


def test_a_look_says_when_a_folder_crosses_the_floor_either_way(tmp_path: Path) -> None:
    with small_fs(tmp_path / "small", "8m", tmp_path) as mnt:
        watch = DiskWatch(lambda: None)
        watch.watch([str(mnt)], FLOOR)
        assert watch.look() is False and watch.low(str(mnt)) is None  # 8 MiB free
        big = fill(mnt, 5)
        assert watch.look() is True  # under the floor: crossed
        why = watch.low(str(mnt))
        assert why is not None and "under runs.disk_floor = 4M" in why and str(mnt) in why
        assert watch.look() is False  # still under: nothing new to say
        big.unlink()
        assert watch.look() is True and watch.low(str(mnt)) is None  # room again
        watch.watch([str(mnt)], runcaps.amount("off"))
        fill(mnt, 5)
        assert watch.look() is False and watch.low(str(mnt)) is None  # the floor off


def test_the_thread_tells_of_a_crossing_as_the_disk_fills(tmp_path: Path) -> None:
    with small_fs(tmp_path / "small", "8m", tmp_path) as mnt:
        crossed = threading.Event()
        watch = DiskWatch(crossed.set, look=0.05)
        watch.start()
        try:
            watch.watch([str(mnt), str(tmp_path)], FLOOR)
            fill(mnt, 5)
            assert crossed.wait(10), "the watch never said the disk went under its floor"
            assert watch.low(str(mnt)) is not None
            assert watch.low(str(tmp_path)) is None  # the other folder has room
            crossed.clear()
            watch.watch([], FLOOR)  # no Run live: it rests, and forgets
            assert crossed.wait(10) and watch.low(str(mnt)) is None
        finally:
            watch.stop()
