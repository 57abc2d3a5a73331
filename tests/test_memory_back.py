"""A frozen Run's memory given back to the person: the kernel's own reclaim on
the Run's cgroup, for real.

Here (cgroup v1, root) in a memory cgroup of v1's hierarchy; on a desktop in a
cgroup v2 with the memory controller (`memory.reclaim`). The memory is a
file's pages, written by a process of the group (page cache is charged to the
group that faulted it in): without swap, anonymous memory cannot go anywhere,
and this machine has none. The bench (`bench/memory_back.py`) measures the
anonymous case with a swap file.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

from owl.engine import acting
from owl.tree import KernelCaps, cgroup
from owlproc import wait_for
from support.need import missing

MB = 1 << 20


def _own_v1_memory() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    return None


@pytest.fixture
def group(tmp_path: Path):
    """A memory cgroup of our own (v1 here; v2 under a delegated one with memory on)."""
    base = _own_v1_memory()
    if base is None or not os.access(base, os.W_OK):
        base = cgroup.delegated_base()
        if base is None or "memory" not in (base / "cgroup.subtree_control").read_text():
            missing("no memory cgroup we may make groups in (root on v1, or delegated v2)")
    path = base / f"owl-test-reclaim-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        path.rmdir()


def usage(path: Path) -> int:
    name = "memory.current" if (path / "memory.current").exists() else "memory.usage_in_bytes"
    return int((path / name).read_text())


def fill(path: Path, where: Path, mb: int) -> None:
    """A process of the group writes `mb` MB to a file: its pages are charged to it."""
    procs = "cgroup.procs" if (path / "cgroup.procs").exists() else "tasks"
    script = f'echo $$ > "$1/{procs}" && exec dd if=/dev/zero of="$2" bs=1M count={mb} conv=fsync'
    subprocess.run(
        ["sh", "-c", script, "sh", str(path), str(where)], check=True, capture_output=True
    )


def test_the_kernel_takes_back_a_groups_memory(group: Path, tmp_path: Path) -> None:
    fill(group, tmp_path / "data", 64)
    before = usage(group)
    assert before >= 60 * MB, before
    freed = cgroup.give_back(group)
    assert freed is not None and freed >= 60 * MB, (before, freed)
    assert usage(group) < before - 60 * MB


def test_a_group_without_a_memory_controller_gives_nothing_back(tmp_path: Path) -> None:
    assert cgroup.give_back(tmp_path) is None


def test_the_freeze_gives_the_runs_memory_back_off_the_engine_thread(
    group: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fill(group, tmp_path / "data", 64)
    before = usage(group)
    caplog.set_level(logging.INFO, logger="owl.engine")
    acting.give_back(7, cgroup.RunGroup(group))
    wait_for(lambda: usage(group) < before - 60 * MB, what="the group's memory given back")
    wait_for(
        lambda: "run 7 frozen: " in caplog.text and "MB of its memory given back" in caplog.text,
        what="the daemon's log line",
    )


def test_on_a_v1_machine_the_freeze_gives_back_through_the_caps_memory_group(
    group: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As here: the Run's cgroup v2 (freeze, kill) has no memory controller, and its
    memory is held in the v1 memory cgroup its caps made: that one is reclaimed."""
    no_memory = tmp_path / "v2-without-memory"
    no_memory.mkdir()
    fill(group, tmp_path / "data", 64)
    before = usage(group)
    caplog.set_level(logging.INFO, logger="owl.engine")
    acting.give_back(8, cgroup.RunGroup(no_memory), KernelCaps(memory_dir=group))
    wait_for(lambda: usage(group) < before - 60 * MB, what="the v1 group's memory given back")
    wait_for(lambda: "run 8 frozen: " in caplog.text, what="the daemon's log line")
