"""A Run's memory and process caps, written where the kernel can hold them (Linux).

Why the kernel as well as Owl's own watch: the watch looks once a sweep, and
a Run can allocate gigabytes or fork thousands of times between two looks;
the kernel refuses the page or the fork at the cap itself. Where Owl may
manage cgroups for the Run:

- cgroup v2 (a delegated one: the daemon under a systemd user service with
  ``Delegate=yes``, or root): in the Run's own cgroup (``cgroup.RunGroup``),
  ``memory.max`` = the cap (the wall: past it the kernel's OOM killer ends a
  process of the Run), ``memory.high`` a sixteenth under it (the kernel
  reclaims and slows the Run there, so the watch usually stops it cleanly
  before the wall), ``memory.swap.max`` = the cap (a Run past its RAM is
  otherwise pushed into swap without end), ``pids.max`` = the process cap. Only for the
  controllers passed down to it (``cgroup.subtree_control``), enabled on the
  way by Owl where they are offered (``cgroup.enable``: the daemon moves into
  a leaf of its own cgroup for it, as a delegated unit must).
- cgroup v1, for a controller not on v2 (as root, or where the hierarchy is
  writable): a cgroup of the Run's own in the ``memory`` hierarchy
  (``memory.limit_in_bytes``, and ``memory.memsw.limit_in_bytes``: RAM and
  swap together) and in ``pids`` (``pids.max``), beside our own
  cgroup there. The Run's reaper joins them before the agent starts.

Read back for the watch: the kernel's count of OOM kills in the Run
(v2 ``memory.events`` ``oom_kill``, v1 ``memory.oom_control`` ``oom_kill``)
and of forks refused at the cap (``pids.events`` ``max``), so a process the
kernel ended at the cap is taken for the cap, not for "the agent exited 137".

Where nothing can be written (macOS, no delegation, ``OWL_CGROUP=off``) the
caps are Owl's watch alone. ``pids.max`` counts threads too, as the kernel
counts tasks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import cgroup

_OFF = ("off", "0", "no", "false")


@dataclass
class KernelCaps:
    """What the kernel holds of one Run's caps, and where it says so."""

    memory: int | None = None  # bytes the kernel holds the Run to; None: not held
    processes: int | None = None
    joins: list[str] = field(default_factory=list)  # v1 cgroups the reaper joins
    where: str = ""  # "cgroup v2", "cgroup v1", "cgroup v2 and v1": for the log
    oom_file: Path | None = None  # where the kernel counts its OOM kills in the Run
    pids_file: Path | None = None  # ... and the forks it refused
    made: list[Path] = field(default_factory=list)  # v1 folders to remove at the end
    memory_dir: Path | None = None  # the Run's own v1 memory cgroup, if it has one

    @classmethod
    def make(
        cls,
        group: cgroup.RunGroup | None,
        instance: str,
        run: str,
        memory: int | None,
        processes: int | None,
    ) -> KernelCaps:
        """Write the caps for a Run about to start (None: no such cap)."""
        caps = cls()
        if _off() or (memory is None and processes is None):
            return caps
        given = {"memory": memory, "pids": processes}
        wanted: dict[str, int] = {k: v for k, v in given.items() if v is not None}
        v2 = v1 = False
        if group is not None:
            for name in _v2_controllers(group.path, list(wanted)):
                v2 |= _v2_write(caps, group.path, name, wanted.pop(name))
        for name, value in wanted.items():
            v1 |= _v1_write(caps, name, value, instance, run)
        caps.where = {(True, False): "cgroup v2", (False, True): "cgroup v1"}.get(
            (v2, v1), "cgroup v2 and v1" if v2 else ""
        )
        return caps

    def oom_kills(self) -> int:
        """Processes of the Run the kernel's OOM killer ended at the Run's own
        cap so far.

        On v2, ``oom_kill`` counts a process of the Run killed by any OOM,
        also one of a cgroup above it (a ``MemoryMax`` on the daemon's unit,
        the machine itself); ``oom``, that an allocation failed at this
        cgroup's own limit (or one below it). Without the latter the kill is
        not the cap's doing, and saying "reached runs.memory" would be false."""
        if self.oom_file is None:
            return 0
        if self.oom_file.name == "memory.events" and _field(self.oom_file, "oom") == 0:
            return 0
        return _field(self.oom_file, "oom_kill")

    def forks_refused(self) -> int:
        """Forks the kernel refused the Run at its process cap so far."""
        return 0 if self.pids_file is None else _field(self.pids_file, "max")

    def remove(self) -> None:
        """Remove the Run's v1 cgroups once empty (a busy one stays; never an error)."""
        for folder in self.made:
            for path in (folder, folder.parent):
                try:
                    path.rmdir()  # the instance's folder too, once its last Run went
                except OSError:
                    pass


def _off() -> bool:
    return os.environ.get("OWL_CGROUP", "auto").lower() in _OFF


def _write(path: Path, value: str) -> bool:
    try:
        with open(path, "w") as fh:
            fh.write(value)
        return True
    except OSError:
        return False


def _field(path: Path, key: str) -> int:
    """The number after `key` in a flat keyed cgroup file ("oom_kill 3"); 0 if unread."""
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
    except (OSError, ValueError):
        pass
    return 0


# ------------------------------------------------------------------ v2


def _v2_controllers(run_dir: Path, wanted: list[str]) -> list[str]:
    """Which of `wanted` the Run's v2 cgroup has: those passed down to it from
    the delegated cgroup through the instance's folder (``cgroup.enable``
    enables them on the way where they are offered)."""
    folder = run_dir.parent
    base = cgroup.delegated_base()
    names = list(wanted)
    if base is not None and folder.parent == base:
        names = cgroup.enable(base, names)
    names = cgroup.enable(folder, names)
    return [n for n in names if (run_dir / f"{n}.max").exists()]


def _v2_write(caps: KernelCaps, run_dir: Path, name: str, value: int) -> bool:
    if name == "memory":
        if not _write(run_dir / "memory.max", str(value)):
            return False
        _write(run_dir / "memory.high", str(value - value // 16))
        # swap as much again at most: room to push a frozen Run's memory out
        # to, not a second machine's worth (Owl's watch counts both together)
        _write(run_dir / "memory.swap.max", str(value))
        caps.memory, caps.oom_file = value, run_dir / "memory.events"
        return True
    if not _write(run_dir / "pids.max", str(value)):
        return False
    caps.processes, caps.pids_file = value, run_dir / "pids.events"
    return True


# ------------------------------------------------------------------ v1


def _v1_write(caps: KernelCaps, name: str, value: int, instance: str, run: str) -> bool:
    base = _v1_base(name)
    if base is None:
        return False
    folder = cgroup.run_folder(base, instance, run)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    limit = "memory.limit_in_bytes" if name == "memory" else "pids.max"
    if not _write(folder / limit, str(value)):
        try:
            folder.rmdir()
        except OSError:
            pass
        return False
    if name == "memory":  # RAM and swap together (v1 has no reclaim to swap to keep room for)
        _write(folder / "memory.memsw.limit_in_bytes", str(value))
    caps.made.append(folder)
    caps.joins.append(str(folder))
    if name == "memory":
        caps.memory, caps.oom_file = value, folder / "memory.oom_control"
        caps.memory_dir = folder
    else:
        caps.processes, caps.pids_file = value, folder / "pids.events"
    return True


def _v1_base(controller: str) -> Path | None:
    """Our own cgroup in the v1 hierarchy of `controller`, if we may make
    cgroups under it; else None."""
    own = None
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, names, path = line.rstrip("\n").split(":", 2)
                if controller in names.split(","):
                    own = path
    except (OSError, ValueError):
        return None
    if own is None:
        return None
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 3 and fields[2] == "cgroup":
                    if controller in fields[3].split(","):
                        base = Path(fields[1]) / own.lstrip("/")
                        return base if os.access(base, os.W_OK) else None
    except OSError:
        pass
    return None


def clear_leftovers(instance: str) -> None:
    """After a crash: remove the empty v1 cgroups an earlier daemon of this home left."""
    for controller in ("memory", "pids"):
        base = _v1_base(controller)
        if base is None:
            continue
        folder = cgroup.instance_folder(base, instance)
        try:
            runs = list(folder.iterdir())
        except OSError:
            continue
        for run in runs:
            if run.name.startswith("run-"):
                try:
                    run.rmdir()
                except OSError:
                    pass
        try:
            folder.rmdir()
        except OSError:
            pass
