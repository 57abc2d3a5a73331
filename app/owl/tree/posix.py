"""The portable process-table backend, built on psutil alone.

This is the reference shape of a backend: every backend module (``linux``,
``macos``) offers the same names. It is what macOS uses for listing and
signalling (psutil has no Linux-style ``/proc`` fast path there), and the
Linux tests run it too so the portable path is exercised on every change.

A backend speaks in *start keys*: an opaque, exactly comparable value that
identifies one process together with its pid (here psutil's create time as a
float; on Linux the raw start time in clock ticks). ``create_time(start)``
turns a key into psutil's ``create_time()`` so identities can be stored and
compared by code that only knows psutil.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import psutil

log = logging.getLogger("owl.tree")

NAME = "posix"

# Normalised states: a backend reports only these three letters.
RUNNING = "R"  # anything live and not stopped (running, sleeping, disk wait)
STOPPED = "T"  # stopped by a signal or a tracer
DEAD = "Z"  # zombie or dead: not a live process any more

# Two create times within this many seconds name the same process start.
# psutil derives create time from clock ticks (10 ms) plus the boot time;
# half a tick absorbs float noise without merging two different starts.
CREATE_TIME_TOLERANCE = 0.005


class Stat(NamedTuple):
    """One row of the process table, as much as a sweep needs."""

    ppid: int
    start: float
    state: str
    sid: int
    pgid: int = -1  # the process group (where the backend reads it)


_STATUS = {
    psutil.STATUS_ZOMBIE: DEAD,
    psutil.STATUS_DEAD: DEAD,
    psutil.STATUS_STOPPED: STOPPED,
    psutil.STATUS_TRACING_STOP: STOPPED,
}


def _state(status: str) -> str:
    return _STATUS.get(status, RUNNING)


def _sid(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def last_pid() -> int | None:
    """Unknown here (only Linux tells), so every sweep reads everything."""
    return None


def snapshot(since: int | None = None) -> dict[int, Stat]:
    """The whole process table: pid -> Stat, read in one pass. (``since``
    is for backends that have last_pid; here it is never given.)"""
    table: dict[int, Stat] = {}
    for proc in psutil.process_iter(["ppid", "create_time", "status"]):
        info = proc.info
        if info["ppid"] is None or info["create_time"] is None:
            continue
        table[proc.pid] = Stat(info["ppid"], info["create_time"], _state(info["status"]), -1)
    return table


def stat(pid: int) -> Stat | None:
    """One process's row, or None if there is no such process."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return Stat(proc.ppid(), proc.create_time(), _state(proc.status()), _sid(pid))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def zombie_children(pid: int) -> list[tuple[int, int]]:
    """(pid, session id) of every zombie child of ``pid``."""
    out: list[tuple[int, int]] = []
    try:
        children = psutil.Process(pid).children()
    except psutil.Error:
        return out
    for child in children:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.append((child.pid, _sid(child.pid)))
        except psutil.Error:
            continue
    return out


def create_time(start: float) -> float:
    """psutil's create_time() for a start key (here they are the same)."""
    return float(start)


def same_start(a: float, b: float) -> bool:
    return abs(a - b) <= CREATE_TIME_TOLERANCE


def matches(start: float, create_time_: float) -> bool:
    """Whether a start key names the process psutil dates ``create_time_``."""
    return same_start(start, create_time_)


class Handle:
    """A way to signal exactly one process start.

    psutil's ``send_signal`` re-checks the create time before signalling, so
    a reused PID is refused; the window between that check and ``kill()``
    is the best a platform without pidfds offers.
    """

    __slots__ = ("proc",)
    holds_fd = False  # psutil opens and closes what it reads

    def __init__(self, proc: psutil.Process) -> None:
        self.proc = proc

    def send(self, sig: int) -> bool:
        """Signal the process; False if it is gone. PermissionError if the
        system will not let us (the tree decides what that means)."""
        try:
            self.proc.send_signal(sig)
            return True
        except (psutil.NoSuchProcess, ProcessLookupError):
            return False
        except psutil.AccessDenied as e:
            raise PermissionError(f"may not signal pid {self.proc.pid}") from e

    def alive(self) -> bool:
        """Whether the process still exists (psutil compares create times)."""
        return self.proc.is_running()

    def close(self) -> None:
        pass


def open_handle(pid: int, start: float) -> Handle | None:
    """A handle on the process ``pid`` that started at ``start``, or None
    if that process is gone (its PID free or reused)."""
    try:
        proc = psutil.Process(pid)
        if not same_start(proc.create_time(), start):
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return Handle(proc)


def environ(pid: int) -> dict[str, str] | None:
    """The environment a process started with; None if unreadable."""
    try:
        return psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return None


class Kin:
    """The sessions and process groups a Run has had, and a watch on its forks.

    Without a child subreaper (macOS) an orphan goes to launchd, pid 1, and
    the kernel hides the environment of Apple's own binaries (``/bin/sh``,
    ``/bin/sleep``): a tool shell that runs ``sleep 300 & exit`` between two
    sweeps leaves an orphan neither the tree's parent links nor the Run's
    tag can name. Its session and process group still can: they are the
    shell's, which the Run had. So every member's session and group is
    noted (never the daemon's own, which unrelated processes share), and an
    untagged orphan in one of them is the Run's.

    Where the kernel offers kqueue (macOS, the BSDs), every member is also
    watched for NOTE_FORK, and ``on_fork`` is called (from a thread of its
    own, once per burst of forks) so that the tree sweeps while a short-lived
    parent is still there to be seen.
    """

    def __init__(
        self, on_fork: Callable[[], None] | None = None, *, kqueue_api: Any = None
    ) -> None:
        # ("s", sid) / ("g", pgid) -> create time of the leader (the process
        # whose pid the id is) when first noted, None if it was gone then.
        self._groups: dict[tuple[str, int], float | None] = {}
        self._own = {("s", _sid(0)), ("g", _pgid(0))}
        self._lock = threading.Lock()
        api = kqueue_api
        if api is None:
            import select

            api = select if hasattr(select, "kqueue") else None
        self._forks = ForkWatch(on_fork, api) if (on_fork and api is not None) else None

    @property
    def watching_forks(self) -> bool:
        return self._forks is not None

    def note(self, pids: Iterable[int]) -> None:
        """Remember the session and group of each (live) member; watch its forks."""
        for pid in pids:
            for key in (("s", _sid(pid)), ("g", _pgid(pid))):
                if key[1] > 0 and key not in self._own and key not in self._groups:
                    leader = _created(key[1])
                    with self._lock:
                        self._groups.setdefault(key, leader)
            if self._forks is not None:
                self._forks.watch(pid)

    def claims(self, pid: int) -> bool:
        """Whether ``pid`` is in a session or process group the Run has had.

        A session or group id is its leader's pid: if that pid now names
        another process than the leader noted, the id was reused by a new
        session (unrelated, however rare), and is no evidence."""
        for key in (("s", _sid(pid)), ("g", _pgid(pid))):
            with self._lock:
                if key not in self._groups:
                    continue
                noted = self._groups[key]
            now = _created(key[1])
            if now is None or (noted is not None and same_start(now, noted)):
                return True
        return False

    def close(self) -> None:
        if self._forks is not None:
            self._forks.close()
            self._forks = None


class ForkWatch:
    """Calls ``on_fork`` soon after any watched process forks (kqueue NOTE_FORK).

    ``api`` is the ``select`` module (or a stand-in with the same names). The
    thread drains every pending event before calling back, so a burst of
    forks costs one sweep, and it waits at most ``POLL`` seconds between
    checks that it should end.
    """

    POLL = 0.5

    def __init__(self, on_fork: Callable[[], None], api: Any) -> None:
        self._api = api
        self._kq = api.kqueue()
        self._on_fork = on_fork
        self._watched: set[int] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="owl-forkwatch", daemon=True)
        self._thread.start()

    def watch(self, pid: int) -> None:
        api = self._api
        with self._lock:
            if pid in self._watched or self._closed.is_set():
                return
            self._watched.add(pid)
            ev = api.kevent(
                pid,
                filter=api.KQ_FILTER_PROC,
                flags=api.KQ_EV_ADD | api.KQ_EV_CLEAR,
                fflags=api.KQ_NOTE_FORK | api.KQ_NOTE_EXIT,
            )
            try:
                self._kq.control([ev], 0, 0)
            except OSError:  # gone already, or not ours to watch
                self._watched.discard(pid)

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            try:
                self._kq.close()
            except OSError:
                pass

    def _serve(self) -> None:
        api = self._api
        while not self._closed.is_set():
            try:
                events = self._kq.control(None, 64, self.POLL)
            except OSError as e:
                if not self._closed.is_set():
                    log.warning("fork watch stopped: %s", e)
                return
            forked = False
            for ev in events:
                if ev.fflags & api.KQ_NOTE_EXIT:
                    with self._lock:
                        self._watched.discard(ev.ident)
                if ev.fflags & api.KQ_NOTE_FORK:
                    forked = True
            if forked and not self._closed.is_set():
                try:
                    self._on_fork()
                except Exception:
                    log.exception("sweep after a fork failed")

    def close(self) -> None:
        """Stop watching. Never waits: a tree dropped on the supervisor's
        thread must not hold it up; the thread ends (and closes the kqueue)
        within ``POLL`` seconds."""
        self._closed.set()


def sweeper(tree: Any) -> Callable[[], None]:
    """A fork callback that sweeps ``tree`` without keeping it alive."""
    ref = weakref.ref(tree)

    def sweep() -> None:
        t = ref()
        if t is not None:
            t.alive()

    return sweep


def _created(pid: int) -> float | None:
    """psutil's create time of ``pid``, or None if there is no such process."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1


def become_subreaper() -> bool:
    """Only Linux can adopt orphaned descendants."""
    return False


def priority_prefix(nice: int) -> list[str]:
    """The argv prefix that starts a program at niceness ``nice``.

    ``nice(1)`` adds to the niceness of the thread that forks, so the
    increment is computed from ours; niceness is inherited across fork and
    exec, so everything the program starts keeps it.
    """
    return nice_prefix(nice)


def set_session_nice(pid: int, start: float, nice: int) -> bool:
    """Where sessions share the CPU as groups (Linux's autogroup), give the
    session of ``pid`` niceness ``nice``; here niceness alone orders the
    CPU, so there is nothing to do."""
    return False


def nice_prefix(nice: int) -> list[str]:
    increment = nice - os.getpriority(os.PRIO_PROCESS, 0)
    tool = shutil.which("nice")
    if tool is None or increment == 0:
        return []
    if increment < 0 and os.geteuid() != 0:
        # Only root may lower niceness; the children keep ours, which is
        # already lower priority than asked.
        return []
    return [tool, "-n", str(increment)]


__all__ = [
    "NAME",
    "RUNNING",
    "STOPPED",
    "DEAD",
    "Stat",
    "Handle",
    "snapshot",
    "stat",
    "last_pid",
    "zombie_children",
    "create_time",
    "same_start",
    "matches",
    "open_handle",
    "environ",
    "become_subreaper",
    "priority_prefix",
    "set_session_nice",
    "Kin",
    "ForkWatch",
    "sweeper",
]
