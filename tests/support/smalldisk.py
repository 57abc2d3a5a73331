"""A real, small disk for tests that fill it up: a tmpfs mounted for one test.

    small_disk = small_disk_fixture("8m")       # in the test module

    def test_x(small_disk: Path) -> None:
        filler = fill(small_disk)                # no space left from here on

A test may name another size with
`@pytest.mark.parametrize("small_disk", ["64m"], indirect=True)`. Mounting
needs root: where it is refused the test is skipped, and fails under CI.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from support.need import under_ci


@contextlib.contextmanager
def small_tmpfs(mnt: Path, size: str, keep_logs_in: Path) -> Iterator[Path]:
    """Mount a tmpfs of `size` at `mnt`; on the way out, copy each home's
    daemon.log to `keep_logs_in` (for a failing test's report) and unmount."""
    mnt.mkdir()
    p = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "owltest", str(mnt)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        if under_ci():
            pytest.fail(f"cannot mount a tmpfs: {p.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield mnt
    finally:
        for log in mnt.glob("*/daemon.log"):
            shutil.copy(log, keep_logs_in / f"{log.parent.name}-daemon.log")
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def small_disk_fixture(size: str = "24m") -> Any:
    """Make a pytest fixture yielding a fresh tmpfs of `size` (see the module docstring)."""

    @pytest.fixture
    def _fixture(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
        with small_tmpfs(tmp_path / "small", getattr(request, "param", size), tmp_path) as mnt:
            yield mnt

    return _fixture


def fill(folder: Path, name: str = "filler") -> Path:
    """Write zeros to `folder`/`name` until the disk is full; returns the file.

    Unbuffered: a buffered file would raise the disk's ENOSPC again when it is
    closed, for whatever part of a write the full disk did not take."""
    filler = folder / name
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return filler
