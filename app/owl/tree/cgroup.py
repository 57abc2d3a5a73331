"""One cgroup v2 per Run, where the user has a delegated cgroup v2 (Linux).

Why, on top of the sweep: the kernel keeps every process of a cgroup in it,
whatever it does to its environment, group, session or parent, and writes to
``cgroup.freeze`` and ``cgroup.kill`` act on all of them at once. So a Run's
cgroup is the one membership list nothing can leave, the freeze is bracketed
by a cgroup freeze (nothing runs or forks while the sweep signals), and the
kill is atomic. The sweep stays: it is the portable path, it gives the
stopped state people and tests see, and it works where no cgroup can be made.

Used where our own cgroup (``/proc/self/cgroup``, ``0::/path``) on a cgroup2
mount is writable by us, i.e. delegated (systemd's user service, or root).
``OWL_CGROUP=off`` turns it off.

Layout: ``<our cgroup>/owl-<instance>/run-<id>``. A Run joins its cgroup
through its reaper, before the agent starts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_base: Path | None | bool = False  # False: not looked for yet


def _mounts() -> list[Path]:
    out = []
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    out.append(Path(fields[1]))
    except OSError:
        pass
    return out


def _own_path() -> str | None:
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def instance_folder(base: Path, instance: str) -> Path:
    """The folder of one Owl home's Run cgroups under ``base`` (the layout above;
    v1's controllers keep the same)."""
    return base / f"owl-{instance[:12] or 'x'}"


def run_folder(base: Path, instance: str, run: str) -> Path:
    """The folder of one Run's cgroup under ``base``."""
    return instance_folder(base, instance) / f"run-{run}"


def delegated_base() -> Path | None:
    """Our own cgroup directory, if we may make cgroups under it; else None.
    Looked for once."""
    global _base
    if _base is not False:
        return _base  # type: ignore[return-value]
    _base = None
    if os.environ.get("OWL_CGROUP", "auto").lower() in ("off", "0", "no", "false"):
        return None
    own = _own_path()
    if own is None:
        return None
    for mount in _mounts():
        base = mount / own.lstrip("/")
        if not (base / "cgroup.procs").exists():
            continue
        probe = base / f"owl-probe-{os.getpid()}"
        try:
            probe.mkdir()
            ok = (probe / "cgroup.freeze").exists() and os.access(probe / "cgroup.procs", os.W_OK)
            probe.rmdir()
        except OSError:
            continue
        if ok:
            _base = base
            return base
    return None


def enable(folder: Path, names: list[str]) -> list[str]:
    """Of `names`, the controllers `folder` passes to its children
    (``cgroup.subtree_control``), enabled there first where it is offered them.

    Why the move: cgroup v2 lets a cgroup hand controllers down only while no
    process sits in it ("no internal processes"), and the daemon sits in its
    own delegated cgroup (systemd's user unit with ``Delegate=yes`` puts it
    there). Where enabling is refused for that (EBUSY) and the daemon and its
    own children (the watchdog) are all that is there, they move into a leaf
    of their own, ``daemon-<pid>``, beside the Runs' folders, as systemd asks
    of a delegated unit, and enabling is tried again. Anything else in the way (other processes, no
    write access): the controllers are not enabled and the caller goes on
    without them (Owl's own watch holds the caps)."""
    try:
        offered = (folder / "cgroup.controllers").read_text().split()
        enabled = (folder / "cgroup.subtree_control").read_text().split()
    except OSError:
        return []
    for name in names:
        if name not in offered or name in enabled:
            continue
        if _enable_one(folder, name) or (_leave_for_leaf(folder) and _enable_one(folder, name)):
            enabled.append(name)
    return [n for n in names if n in enabled]


def _enable_one(folder: Path, name: str) -> bool:
    try:
        with open(folder / "cgroup.subtree_control", "w") as fh:
            fh.write(f"+{name}")
        return True
    except OSError:
        return False


def _leave_for_leaf(folder: Path) -> bool:
    """Move this process and its descendants out of `folder` into a leaf under
    it; True if `folder` then holds no process. Only where they are all it
    holds (the daemon and its watchdog, in the unit's cgroup)."""
    me = os.getpid()
    try:
        pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        if not pids or not all(_descends(p, me) for p in pids):
            return False
        leaf = folder / f"daemon-{me}"
        leaf.mkdir(exist_ok=True)
        for pid in pids:
            with open(leaf / "cgroup.procs", "w") as fh:
                fh.write(str(pid))
        return not (folder / "cgroup.procs").read_text().split()
    except (OSError, ValueError):
        return False


def _descends(pid: int, ancestor: int) -> bool:
    """Whether `pid` is `ancestor` or a process below it."""
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


class RunGroup:
    """The cgroup of one Run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def make(cls, instance: str, run: str) -> RunGroup | None:
        """The Run's cgroup, made afresh; None where cgroups are not ours."""
        base = delegated_base()
        if base is None:
            return None
        path = run_folder(base, instance, run)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        return cls(path)

    def _write(self, name: str, value: str, path: Path | None = None) -> bool:
        try:
            with open((path or self.path) / name, "w") as fh:
                fh.write(value)
            return True
        except OSError:
            return False

    def _groups(self) -> list[Path]:
        """This cgroup and every one a process of the Run made below it."""
        out = [self.path]
        for folder, dirs, _ in os.walk(self.path):
            out += [Path(folder) / d for d in dirs]
        return out

    def pids(self) -> list[int]:
        """Every process in the Run's cgroup (and below), read in one pass."""
        out: list[int] = []
        for group in self._groups():
            try:
                with open(group / "cgroup.procs") as fh:
                    out += [int(x) for x in fh.read().split()]
            except (OSError, ValueError):
                continue
        return out

    def freeze(self, on: bool, wait: float = 0.05) -> bool:
        """Freeze (or thaw) every process at once; with `on`, wait (briefly)
        until the kernel says the cgroup is frozen. False if it could not."""
        if not self._write("cgroup.freeze", "1" if on else "0"):
            return False
        if not on:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if "frozen 1" in (self.path / "cgroup.events").read_text():
                    return True
            except OSError:
                return False
            time.sleep(0.0002)
        return False

    def kill(self) -> bool:
        """SIGKILL every process of the cgroup at once (Linux 5.14+)."""
        return self._write("cgroup.kill", "1")

    def reclaim(self) -> int | None:
        """Give the frozen Run's memory back to the person (`give_back`)."""
        return give_back(self.path)

    def remove(self) -> None:
        """Remove the cgroup once it is empty (a busy one stays; never an error)."""
        for group in [*reversed(self._groups()), self.path.parent]:
            try:
                group.rmdir()  # the instance's folder too, once its last Run went
            except OSError:
                pass


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def give_back(path: Path) -> int | None:
    """Ask the kernel to reclaim all the memory of the cgroup at `path` now: its
    file pages dropped, its anonymous pages written to swap where there is swap.

    Why: a frozen Run keeps its memory, and when the person comes back it is
    their programs the kernel would page out to make room, at their first
    touch. Reclaimed at the freeze, the Run's pages are the ones out, and a
    thawed Run faults its own back in as it goes on (nothing to restore).

    cgroup v2: ``memory.reclaim`` (Linux 5.19+), asked for ``memory.current``
    bytes; v1: ``memory.force_empty``, which reclaims as much as it can. Slow
    (a write per GB of swap): never on the engine thread. The bytes the
    cgroup's own count went down by, or None where it has neither file (no
    memory controller on it)."""
    if (path / "memory.reclaim").exists():
        usage, ask, value = path / "memory.current", path / "memory.reclaim", None
    elif (path / "memory.force_empty").exists():
        usage, ask, value = path / "memory.usage_in_bytes", path / "memory.force_empty", "0"
    else:
        return None
    before = _read_int(usage)
    if before is None:
        return None
    try:
        with open(ask, "w") as fh:
            fh.write(value or str(before))
    except OSError:
        pass  # EAGAIN: less than asked could be reclaimed (no swap, pages locked)
    after = _read_int(usage)
    return None if after is None else max(0, before - after)


def leftovers(instance: str) -> list[RunGroup]:
    """After a crash: the Run cgroups an earlier daemon of this home left."""
    base = delegated_base()
    if base is None:
        return []
    folder = instance_folder(base, instance)
    try:
        return [RunGroup(p) for p in folder.iterdir() if p.name.startswith("run-")]
    except OSError:
        return []
