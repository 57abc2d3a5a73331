"""How much memory a set of processes holds, read cheaply enough for every sweep.

Two figures, because each is wrong in its own way:

- RSS (resident set) counts every page a process has mapped in RAM, shared
  ones included: a hundred Python workers forked from one parent, or a
  hundred processes using one libc, each count the shared pages again, so a
  sum of RSS can be several times what the Run really holds. But it is one
  small read per process (``/proc/PID/statm``, about 10 us; ``status`` where swap is in use), and it is never
  less than the truth: a sum of RSS within a cap proves the Run is.
- PSS (proportional set) divides each shared page among the processes that
  share it, so a sum over the Run is what the Run holds (pages shared with
  processes outside it counted in part). It costs a walk of the process's
  mappings in the kernel (``/proc/PID/smaps_rollup``, tens of us to a few ms
  for a large process), too much for every process on every sweep.

So the watch sums RSS, and only when that sum passes the cap does it sum PSS
for the figure it acts on and names. Both count what the process has in swap
as well (VmSwap, SwapPss): on a machine with swap a Run past its RAM is
pushed there, not stopped, and a swap full of a Run is the person's machine
taken all the same. USS (pages only this process holds)
would understate: a Run that forks workers sharing copy-on-write memory
holds that memory, and USS would count none of it.

Linux reads /proc directly; elsewhere (macOS) psutil's RSS is all there is,
and stands for both.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

import psutil

_LINUX = sys.platform.startswith("linux")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def total_memory() -> int:
    """The machine's RAM in bytes."""
    return int(psutil.virtual_memory().total)


def swapping() -> bool:
    """Whether anything is in swap on this machine (one read of /proc/meminfo):
    if not, no process has a page there and RSS alone is read."""
    try:
        mem = psutil.swap_memory()
    except (OSError, RuntimeError):
        return True
    return mem.used > 0


def resident(pids: Iterable[int], swap: bool = True) -> int:
    """The sum of the processes' RSS (and, with `swap`, what they have in
    swap) in bytes; a process gone counts 0."""
    if not _LINUX:
        return sum(_psutil_rss(pid) for pid in pids)
    total = 0
    for pid in pids:
        try:
            if not swap:  # statm: a few numbers, the cheapest read there is
                with open(f"/proc/{pid}/statm", "rb") as fh:
                    total += int(fh.read().split()[1]) * _PAGE
                continue
            with open(f"/proc/{pid}/status", "rb") as fh:
                for line in fh:
                    if line.startswith((b"VmRSS:", b"VmSwap:")):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return total


def proportional(pids: Iterable[int]) -> int:
    """The sum of the processes' PSS and SwapPss in bytes: what they hold
    between them, in RAM and in swap (RSS where the kernel gives no PSS)."""
    if not _LINUX:
        return sum(_psutil_rss(pid) for pid in pids)
    total = 0
    for pid in pids:
        total += _pss(pid)
    return total


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            total = 0
            for line in fh:
                if line.startswith((b"Pss:", b"SwapPss:")):
                    total += int(line.split()[1]) * 1024
            return total
    except (OSError, ValueError, IndexError):
        pass
    return resident([pid])


def _psutil_rss(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        return 0
