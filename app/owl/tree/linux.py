"""The Linux backend: /proc read directly, pidfds, the child subreaper.

Why not psutil here: a freeze sweeps the whole process table several times
and must finish in milliseconds. One ``/proc/PID/stat`` read per process
gives parent, state, session and start time at once (about 13 us each);
psutil would read the same file once per attribute. Signals go through
pidfds (Linux >= 5.3), which name one process for good, so a PID reused
between the sweep and the signal can never be hit.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal

import psutil

from . import autogroup, handles, posix
from .posix import DEAD, RUNNING, STOPPED, CREATE_TIME_TOLERANCE

NAME = "linux"

_PROC = "/proc"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PR_SET_CHILD_SUBREAPER = 36

_STATE = {ord("Z"): DEAD, ord("X"): DEAD, ord("x"): DEAD, ord("T"): STOPPED, ord("t"): STOPPED}


class Stat(posix.Stat):
    """As posix.Stat, but ``start`` is the start time in clock ticks since
    boot (an int, compared exactly)."""


def _parse(data: bytes) -> Stat | None:
    # The command name (field 2) may contain spaces and parentheses; every
    # field after the last ')' is plain.
    close = data.rfind(b")")
    if close < 0:
        return None
    fields = data[close + 2 :].split(b" ", 20)
    if len(fields) < 20:
        return None
    return Stat(
        int(fields[1]),
        int(fields[19]),
        _STATE.get(fields[0][0], RUNNING),
        int(fields[3]),
        int(fields[2]),
    )


_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)


def _read_stat(pid: int | str) -> Stat | None:
    """One process's row; None if it is gone. Out of file descriptors, the
    spare one is used (see handles.py); if even that fails, OSError: a
    process that cannot be read is never taken as gone."""
    data = _read_raw(pid)
    return _parse(data) if data is not None else None


def _read_raw(pid: int | str) -> bytes | None:
    """/proc/PID/stat as read, or None if the process is gone (see _read_stat)."""
    path = f"{_PROC}/{pid}/stat"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        if exc.errno not in _OUT_OF_FDS:
            return None
        try:
            fd = handles.spare(lambda: os.open(path, os.O_RDONLY))
        except OSError as again:
            if again.errno in _OUT_OF_FDS:
                raise
            return None
    try:
        return os.read(fd, 2048)
    except OSError:
        return None
    finally:
        os.close(fd)


def snapshot(since: int | None = None) -> dict[int, Stat]:
    """The process table: pid -> Stat, one read per process; with
    ``since``, only processes with a higher pid (see last_pid)."""
    table: dict[int, Stat] = {}
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        pid = int(name)
        if since is not None and pid <= since:
            continue
        row = _read_stat(name)
        if row is not None:
            table[pid] = row
    return table


def last_pid() -> int | None:
    """The pid the kernel handed out last (in our pid namespace).

    PIDs are handed out in increasing order until they wrap around, so a
    process created after this call has a higher pid: a sweep that already
    knows the table as of this mark need only read the processes above it.
    A lower value later means the counter wrapped (or was set back), and
    the caller must read everything again.
    """
    try:
        with open(f"{_PROC}/loadavg", "rb") as fh:
            return int(fh.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def stat(pid: int) -> Stat | None:
    """One process's row, or None if there is no such process. A process in
    the kernel's uninterruptible wait with a SIGSTOP pending reads stopped:
    it acts on the stop before it runs a line of its own again. Such is a
    shell waiting out its vfork child (`sh` starting `/bin/true`) whose child
    the freeze stopped first: it waits in the kernel until the thaw."""
    data = _read_raw(pid)
    row = _parse(data) if data is not None else None
    if row is not None and data is not None and row.state == RUNNING:
        if data[data.rfind(b")") + 2 :][:1] == b"D" and _stop_pending_in_kernel(pid):
            return Stat(row.ppid, row.start, STOPPED, row.sid, row.pgid)
    return row


_SIGSTOP_BIT = 1 << (signal.SIGSTOP - 1)


def _stop_pending_in_kernel(pid: int) -> bool:
    """In uninterruptible sleep ('D') with SIGSTOP pending (its own or its group's)."""
    try:
        with open(f"{_PROC}/{pid}/status", "rb") as fh:
            data = fh.read(4096)
    except OSError:
        return False
    fields = dict(line.split(b":", 1) for line in data.splitlines() if b":" in line)
    if not fields.get(b"State", b"").strip().startswith(b"D"):
        return False
    pending = 0
    for key in (b"SigPnd", b"ShdPnd"):
        try:
            pending |= int(fields.get(key, b"0").strip(), 16)
        except ValueError:
            continue
    return bool(pending & _SIGSTOP_BIT)


def zombie_children(pid: int) -> list[tuple[int, int]]:
    """(pid, session id) of every zombie child of ``pid``."""
    return [
        (child, row.sid)
        for child, row in snapshot().items()
        if row.ppid == pid and row.state == DEAD
    ]


def create_time(start: int) -> float:
    """psutil's create_time() for a start key: the same arithmetic, so the
    two compare equal."""
    return start / _CLOCK_TICKS + psutil.boot_time()


def same_start(a: int, b: int) -> bool:
    return a == b


def matches(start: int, create_time_: float) -> bool:
    """Whether a start key names the process psutil dates ``create_time_``."""
    return abs(create_time(start) - create_time_) <= CREATE_TIME_TOLERANCE


class Handle:
    """An open pidfd on one process start."""

    __slots__ = ("fd",)
    holds_fd = True  # counted against handles.BUDGET while kept

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, sig: int) -> bool:
        """Signal the process; False if it has exited. PermissionError if
        the system will not let us (a process that became another user)."""
        if self.fd < 0:
            return False
        try:
            signal.pidfd_send_signal(self.fd, sig)
            return True
        except ProcessLookupError:
            return False

    def send_group(self, sig: int) -> bool:
        """Signal the process group this process leads, all of it at once
        (see groups.py); False where that cannot be done (Linux before 6.9,
        no such group any more, or none of it may be signalled): the caller
        then signals each process."""
        global _group_signals
        if self.fd < 0 or not _group_signals:
            return False
        try:
            signal.pidfd_send_signal(self.fd, sig, None, _PIDFD_SIGNAL_PROCESS_GROUP)
            return True
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                _group_signals = False  # the kernel has no such flag
            return False

    def alive(self) -> bool:
        """Whether the very process this fd was opened on still exists
        (a zombie counts): exact, unlike a start time in clock ticks."""
        if self.fd < 0:
            return False
        try:
            signal.pidfd_send_signal(self.fd, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


_pidfds = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")
# pidfd_send_signal's flag for "the process group this pidfd's process leads" (Linux 6.9).
_PIDFD_SIGNAL_PROCESS_GROUP = 4
_group_signals = True


def open_handle(pid: int, start: int) -> Handle | posix.Handle | None:
    """A handle on the process ``pid`` that started at ``start``, or None
    if that process is gone (its PID free or reused). OSError (out of file
    descriptors, even with the spare one) when it cannot be opened: the
    caller names the process rather than take it for gone.

    The pidfd is opened first and the start time read after: if the two
    disagree the PID was reused and nothing is signalled; if they agree, the
    fd was opened on the remembered process (a PID cannot be reused by a
    process that started before the fd was opened).
    """
    global _pidfds
    if _pidfds:
        try:
            fd = handles.spare(lambda: os.pidfd_open(pid))
        except ProcessLookupError:
            return None
        except OSError as exc:
            if exc.errno != errno.ENOSYS:
                raise
            _pidfds = False  # kernel older than 5.3
        else:
            try:
                row = _read_stat(pid)
            except OSError:
                os.close(fd)
                raise
            if row is None or row.start != start:
                os.close(fd)
                return None
            return Handle(fd)
    # No pidfds: psutil checks the create time right before signalling, a
    # small window instead of none.
    row = _read_stat(pid)
    if row is None or row.start != start:
        return None
    try:
        return posix.Handle(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return None


def environ(pid: int) -> dict[str, str] | None:
    """The environment a process started with; None if unreadable (gone,
    a zombie, or someone else's)."""
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def become_subreaper() -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER, 1): orphans of our descendants are
    re-parented to us instead of init, so a sweep still finds them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_session_nice(pid: int, start: int, nice: int) -> bool:
    """Give the session of process ``pid`` (started at ``start``) niceness
    ``nice`` as a whole; False if that process is gone, is in our own
    session, or the kernel has no autogroups. True once written, or handed to
    ``autogroup.Later`` where the kernel asks to wait (an ordinary user may
    write one session's weight per 100 ms, machine-wide): written then.

    Why: with autogroup on (``kernel.sched_autogroup_enabled``, the default
    of most desktop kernels), the CPU is shared first between sessions, each
    weighted as one process at the session's niceness (0 unless written),
    and a process's own niceness only orders it within its session. An
    agent at nice 10 in a session of its own would get as much CPU as the
    person's whole desktop; writing the session's ``/proc/PID/autogroup``
    makes the session itself weigh as a nice-10 process. Any value from 0
    up needs no privilege, so it can be raised back as well. Every session
    an agent starts (setsid) is a new group at 0. Where the process sits in
    a cgroup with the cpu controller on, the cgroup's weight rules instead
    and this changes nothing.
    """
    try:
        return _write_session_nice(pid, start, nice)
    except OSError as e:
        if e.errno != errno.EAGAIN:
            return False
    _LATER.put(pid, start, nice)
    return True


def _write_session_nice(pid: int, start: int, nice: int) -> bool:
    """The write itself; OSError(EAGAIN) when the kernel's limit says later.

    Open-then-check, as for pidfds: the /proc directory is opened first and
    the start time read through it, so a PID reused since the sweep is never
    the one written to (the directory fd names one process for good).
    """
    try:
        folder = os.open(f"{_PROC}/{pid}", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fd = os.open("stat", os.O_RDONLY, dir_fd=folder)
        try:
            row = _parse(os.read(fd, 2048))
        finally:
            os.close(fd)
        if row is None or row.start != start or row.sid == os.getsid(0):
            return False
        autogroup.write_once(folder, nice)
        return True
    except OSError as e:
        if e.errno == errno.EAGAIN:
            raise
        return False
    finally:
        os.close(folder)


_LATER = autogroup.Later(_write_session_nice)


def priority_prefix(nice: int) -> list[str]:
    """``nice -n K ionice -c 3 -t --``: low CPU priority and the idle I/O
    class, both inherited by every process the program starts.

    Exec'ing through the two tools sets the priority before the program's
    first instruction, so even a grandchild started at once inherits it;
    this avoids ``preexec_fn``, which is unsafe in a threaded daemon.
    ``-t`` runs the program even where the idle class cannot be set.
    """
    prefix = posix.nice_prefix(nice)
    tool = shutil.which("ionice")
    if tool is not None:
        prefix += [tool, "-c", "3", "-t"]
    if prefix:
        prefix.append("--")
    return prefix
