"""Which OOM kills in a Run's cgroup v2 are its cap's doing, read from the
kernel's `memory.events` as it writes it (the real v2 path runs in the system
tier: this host's memory controller is bound to v1)."""

from __future__ import annotations

from pathlib import Path

from owl.tree.cgroup_caps import KernelCaps

EVENTS = "low 0\nhigh {high}\nmax {max}\noom {oom}\noom_kill {kill}\noom_group_kill 0\n"


def caps_reading(tmp_path: Path, **fields: int) -> KernelCaps:
    path = tmp_path / "memory.events"
    path.write_text(EVENTS.format(**fields))
    return KernelCaps(memory=64 << 20, oom_file=path)


def test_a_kill_at_the_runs_own_limit_is_the_caps(tmp_path: Path) -> None:
    assert caps_reading(tmp_path, high=40, max=3, oom=1, kill=1).oom_kills() == 1


def test_a_kill_from_a_limit_above_the_run_is_not(tmp_path: Path) -> None:
    """The unit's MemoryMax reached: the kernel killed a process of the Run,
    but no allocation failed at the Run's own limit."""
    assert caps_reading(tmp_path, high=0, max=0, oom=0, kill=1).oom_kills() == 0
