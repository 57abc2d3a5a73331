"""What one Run may take of the machine: memory, processes, free disk.

Theory of operation
-------------------

Owl's promise is the machine back the moment the person returns, so a Run
may not take all of it while they are away: a frozen Run keeps every byte it
holds. Three caps, from `[runs]`:

    memory      a size ("8G") or a share of the machine's RAM ("50%")
    processes   how many processes the Run may have at once
    disk_floor  free space kept on the filesystems that hold the worktree
                and Owl's home: a size ("2G") or a share of the filesystem

The defaults, and why: half the RAM for the Run leaves the person's desktop,
browser and editor the other half (with "RAM less 4 GiB" a 8 GiB laptop would
be left 4 GiB too, but a 64 GiB one would let one Run take 60); 4096
processes is far past what a build or a test run starts (a compiler per core,
a test worker per core) and far below the tens of thousands that exhaust a
pid table or a desktop's task limit; 2 GiB of free disk keeps a browser's
cache, a package update and Owl's own records writable.

A Run over `memory` or `processes` is stopped: frozen at once (it stops
growing), then ended as the grace window ends one (TERM, 5 s, KILL). A Run
that brings the disk under the floor is frozen at once and held: it goes on
if room returns within the grace window, and is ended as it closes. Either
way the Run is interrupted, not failed: its Job spends no attempt and goes
back to the queue with the reason, which names the cap and the figure
("stopped: used 8.1 GiB of memory, over runs.memory = 8G"). A second stop in
a row of the same Job blocks it (nothing spent): the work does not fit the
cap, and only the person can change one or the other (`block_words`).

Pure: sizes in bytes, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .capwords import STOPPED

MEMORY_DEFAULT = "50%"
PROCESSES_DEFAULT = 4096
DISK_FLOOR_DEFAULT = "2G"

MIN_MEMORY = 64 * 1024 * 1024  # less than this runs no agent at all: a typo
MIN_PROCESSES = 16  # the Run's own reaper, sandbox and agent already take a few
MAX_PROCESSES = 4_194_304  # the kernel's largest pid_max
MAX_FLOOR_SHARE = 0.9
MAX_BYTES = 1 << 60  # an exbibyte: past any machine

OFF = "off"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*\Z", re.IGNORECASE)
_SHARE = re.compile(r"^\s*(\d{1,3}(?:\.\d{1,2})?)\s*%\s*\Z")
_UNITS = "_kmgt"


@dataclass(frozen=True)
class Amount:
    """A cap as the person wrote it: bytes, or a share of a whole (RAM, a
    filesystem), or off (both None)."""

    text: str  # as shown back: "8G", "50%", "off"
    size: int | None = None
    share: float | None = None

    def of(self, whole: int) -> int | None:
        """The cap in bytes against `whole` bytes; None when off."""
        if self.size is not None:
            return self.size
        if self.share is not None:
            return int(whole * self.share)
        return None

    @property
    def off(self) -> bool:
        return self.size is None and self.share is None


def amount(value: object, *, lowest: int = 0, top_share: float = 1.0) -> Amount:
    """`value` read as a cap: "8G", "512M", "1.5GiB", a number of bytes,
    "50%", or "off". ValueError, saying what is wanted, otherwise."""
    if isinstance(value, str) and value.strip().lower() == OFF:
        return Amount(OFF)
    if isinstance(value, int) and not isinstance(value, bool):
        return _sized(value, size_text(value), lowest)
    if not isinstance(value, str):
        raise ValueError('must be a size such as "8G", a share such as "50%", or "off"')
    m = _SHARE.match(value)
    if m is not None:
        share = float(m.group(1)) / 100
        if not 0 < share <= top_share:
            raise ValueError(f"a share must be more than 0% and at most {top_share:.0%}")
        return Amount(f"{m.group(1)}%", share=share)
    m = _SIZE.match(value)
    if m is None:
        raise ValueError('must be a size such as "8G", a share such as "50%", or "off"')
    n = int(float(m.group(1)) * 1024 ** _UNITS.index(m.group(2).lower() or "_"))
    return _sized(n, value.strip(), lowest)


def _sized(n: int, text: str, lowest: int) -> Amount:
    if n < lowest:
        raise ValueError(f"must be at least {size_text(lowest)}")
    if n > MAX_BYTES:
        raise ValueError("is larger than any machine")
    return Amount(text, size=n)


def size_text(n: int) -> str:
    """Bytes as a config writes them: "8G", "512M"; else the number."""
    for letter, power in (("T", 4), ("G", 3), ("M", 2), ("K", 1)):
        if n >= 1024**power and n % 1024**power == 0:
            return f"{n // 1024**power}{letter}"
    return str(n)


def shown(n: int) -> str:
    """Bytes for a person: "8.1 GiB", "300 MiB", "12 KiB"."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}" if unit in ("GiB", "TiB") else f"{size:.0f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def processes_check(v: int) -> str | None:
    """The config's check of `runs.processes` (0: no cap)."""
    if v == 0 or MIN_PROCESSES <= v <= MAX_PROCESSES:
        return None
    return f"must be 0 (no cap) or from {MIN_PROCESSES} to {MAX_PROCESSES}"


# ------------------------------------------------------------ the reasons


def memory_over(used: int, cap: int, written: str) -> str | None:
    """The reason a Run using `used` bytes is stopped, or None within `cap`."""
    if used <= cap:
        return None
    return f"{STOPPED}used {shown(used)} of memory, over runs.memory = {written}"


def memory_killed(cap: int, written: str) -> str:
    """The reason when the kernel ended a process of the Run at its memory cap."""
    return (
        f"{STOPPED}reached runs.memory = {written} ({shown(cap)}): the kernel ended a "
        "process of the Run that asked for more"
    )


def processes_over(count: int, cap: int) -> str | None:
    """The reason a Run of `count` processes is stopped, or None within `cap`."""
    if count < cap:
        return None
    return f"{STOPPED}started {count} processes, at runs.processes = {cap}"


def forks_refused(cap: int) -> str:
    """The reason when the kernel refused the Run a process past its cap."""
    return f"{STOPPED}reached runs.processes = {cap}: the kernel refused it more"


def disk_under(free: int, floor: int, written: str, where: str) -> str | None:
    """The reason a Run is held while `where` has only `free` bytes, or None."""
    if free >= floor:
        return None
    return (
        f"{STOPPED}{shown(free)} free on the disk holding {where}, under "
        f"runs.disk_floor = {written}"
    )


def block_words(reason: str, job_id: int) -> str:
    """Why a Job stopped by a cap twice in a row is blocked, and what unblocks it."""
    key = reason.split(" runs.", 1)[1].split(" ", 1)[0] if " runs." in reason else "memory"
    return (
        f"its Runs were stopped twice in a row by a cap ({reason.removeprefix(STOPPED)}); "
        f"raise runs.{key} in the config or change the task (owl jobs reply {job_id}), "
        f"then owl jobs extend {job_id}"
    )


def near(used: int, cap: int) -> bool:
    """Close enough to the cap that the watch looks more often (a fast grower
    passes it by little)."""
    return used * 4 >= cap * 3
