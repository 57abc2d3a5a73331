"""A real, small disk for tests that fill it up: an ext4 filesystem in a file,
mounted through a loop device for one test (a journal, blocks and inodes as a
laptop's disk has them, where a tmpfs would only be memory).

    small_disk = small_disk_fixture("8m")       # in the test module

    def test_x(small_disk: Path) -> None:
        filler = fill(small_disk)                # no space left from here on

A test may name another size with
`@pytest.mark.parametrize("small_disk", ["64m"], indirect=True)`. Mounting
needs root and a loop device: where either is refused the test is skipped, and
fails under CI.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from support.need import under_ci


def _bytes(size: str) -> int:
    """`24m` -> 24 MiB: the sizes the tests name."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(size[:-1]) * units[size[-1].lower()]


def _refused(what: str, p: subprocess.CompletedProcess[str]) -> None:
    why = f"cannot {what}: {(p.stderr or p.stdout).strip()}"
    if under_ci():
        pytest.fail(why)
    pytest.skip(why)


@contextlib.contextmanager
def small_fs(mnt: Path, size: str, keep_logs_in: Path) -> Iterator[Path]:
    """Mount a fresh ext4 of `size` at `mnt` (0700, no blocks kept for root, so
    the daemon running as root fills it as a user would); on the way out, copy
    each home's daemon.log to `keep_logs_in` (for a failing test's report) and
    unmount. The image lies beside `mnt`, off the small disk."""
    image = mnt.with_name(mnt.name + ".ext4")
    with open(image, "wb") as f:
        f.truncate(_bytes(size))
    made = subprocess.run(
        [
            "mkfs.ext4",
            "-q",
            "-F",
            "-m",
            "0",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0",
            str(image),
        ],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        _refused("make an ext4 filesystem", made)
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        _refused("mount a filesystem through a loop device", mounted)
    try:
        mnt.chmod(0o700)
        yield mnt
    finally:
        for log in mnt.glob("*/daemon.log"):
            shutil.copy(log, keep_logs_in / f"{log.parent.name}-daemon.log")
        # lazily: a process the test left behind may hold a file still; the loop
        # device is let go (autoclear) when the last one does
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        image.unlink(missing_ok=True)


def small_disk_fixture(size: str = "24m") -> Any:
    """Make a pytest fixture yielding a fresh small disk of `size` (see the module docstring)."""

    @pytest.fixture
    def _fixture(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
        with small_fs(tmp_path / "small", getattr(request, "param", size), tmp_path) as mnt:
            yield mnt

    return _fixture


def fill(folder: Path, name: str = "filler") -> Path:
    """Write zeros to `folder`/`name` until the disk is full; returns the file.

    Unbuffered: a buffered file would raise the disk's ENOSPC again when it is
    closed, for whatever part of a write the full disk did not take."""
    filler = folder / name
    with open(filler, "wb", buffering=0) as f:
        # to the last byte: ext4 refuses a large write while a few blocks are still
        # free (what it holds back for the write's own metadata), and a record
        # small enough would then still fit
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler
