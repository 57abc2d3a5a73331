"""Every process of one Run, whatever its process group or session.

Why a tree and not a process group: agents (Claude Code's Bash tool, test
runners, language servers) start their tools with setsid, so signalling the
agent's group misses them. A Run is therefore everything descended from the
agent, found by walking parent links over the whole process table, plus
orphans: a process whose parent died is re-parented to this daemon (the
child subreaper) or to init, where it is recognised by the Run's tag in its
environment, or by having been seen before.

Identities are (pid, start) pairs; a remembered pid is only ever signalled
after its start time has been checked (pidfds on Linux), so a PID that was
reused by someone else's process is never hit.

Beside it, each with a reason of its own: ``orphans`` (which re-parented
processes are the Run's), ``untouchable`` (a process Owl may not signal),
``escaped`` (work the Run may have handed to launchd, named, not claimed),
``cgroup_bracket`` (the Run's cgroup v2 around the freeze and the kill),
``survivors`` (processes known only by their tag, after a crash), ``known``
(the members met), ``walk`` (down one table's parent links) and
``signalling`` (a signal to one member, through a handle checked to be it).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import ModuleType
from typing import Any

import psutil

from . import _platform, cgroup_bracket, escaped, groups, signalling, untouchable
from .known import Known
from .member import TreeMember, wait_stopped
from .orphans import Orphans
from .walk import children_of, descend
from owl.rules.lifecycle import KILL_DELAY

# A freeze that has not converged after this many sweeps is facing a process
# that outruns the sweep (fork, exit, fork...); stop trying and report.
_MAX_ROUNDS = 200
KILL_TIMEOUT = KILL_DELAY
# How long freeze() waits for signalled processes to actually stop. A
# process only stops when it next runs; one in uninterruptible I/O stops
# when that ends, and cannot run before it either, so this stays short.
_SETTLE_TIMEOUT = 0.25


class ProcessTree:
    """Every process of one Run, whatever its process group or session.

    ``tag`` is the (name, value) environment variable every process of the
    Run carries (``("OWL_RUN_ID", "42")``); ``None`` means: only what
    descends from the leaders. With ``nice``, every session of the Run
    weighs as one process at that niceness (see the backend's
    ``set_session_nice``): where sessions share the CPU as groups, a
    process's own niceness does not reach beyond its session. (Raising the
    weight back while a freeze takes hold, so that the processes run into
    their stop sooner, was measured and changed nothing: a woken process
    is placed by its lag, not its weight.) Methods are thread-safe.
    """

    def __init__(
        self,
        tag: tuple[str, str] | None,
        leader: int | None = None,
        *,
        backend: ModuleType | None = None,
        cgroup: Any = None,
        nice: int | None = None,
    ) -> None:
        self._cgroup = cgroup  # a cgroup.RunGroup, or None
        self._nice = nice  # each session of the Run weighs as a process at this
        self._weighed: set[int] = set()  # the sessions (sids) given it
        self._b = backend or _platform.backend
        self._lock = threading.RLock()
        self._members = Known(self._b)
        self._order: list[TreeMember] = []  # live, parents first
        self._rows: dict[int, Any] = {}  # the last sweep's table
        self._running: list[TreeMember] = []  # what the last freeze left running
        self._mark: int | None = None  # last_pid() at the last sweep
        self._full_marks: list[int] = []  # ... at the last two full ones
        self._me = os.getpid()
        self._my_sid = os.getsid(0)
        self._grouped: dict[TreeMember, int] = {}  # stopped with their group, by the last freeze
        # When the last freeze had signalled every process it knew (monotonic):
        # what follows is sweeping for new ones and the kernel stopping them.
        self.signalled_at: float | None = None
        self.stopped_first_at: float | None = None  # ... and stop_known() before it
        self.held_at: float | None = None  # ... and froze the Run's cgroup (where it has one)
        # Backends without a subreaper know a Run's sessions and forks (posix.Kin).
        kin = getattr(self._b, "Kin", None) if tag is not None else None
        self._kin = kin(on_fork=self._b.sweeper(self)) if kin is not None else None
        self._orphans = Orphans(tag, self._b, self._kin) if tag is not None else None
        if leader is not None:
            self.add_leader(leader)

    # -- membership -------------------------------------------------------

    def add_leader(self, pid: int, create_time: float | None = None) -> None:
        """Make ``pid`` (and all it starts) part of the Run.

        With ``create_time`` (as psutil reports it, e.g. from the database),
        the pid is only taken if it is still that same process.
        """
        row = self._b.stat(pid)
        if row is None or row.state == self._b.DEAD:
            return
        if create_time is not None and not self._b.matches(row.start, create_time):
            return
        with self._lock:
            m = self._members.remember(pid, row.start)
            self._weigh(m, row.sid)
            if self._kin is not None:
                self._kin.note([pid])
            self._mark = None  # its descendants: the next sweep reads all
            self._full_marks = []
            if self._orphans is not None:
                self._orphans.leader_started(row.start)

    # -- the sweep --------------------------------------------------------

    def _sweep(self, since: int | None = None) -> list[TreeMember]:
        """Read the process table; return the live members, parents first,
        remembering every new one.

        ``since`` (a last_pid mark): read only processes started after it
        and take the members already known to be alive on trust; a caller
        that needs them checked does so itself (freeze does, when it waits
        for them to stop). Falls back to a full read when the pids wrapped.
        """
        b = self._b
        mark = b.last_pid()
        partial = since is not None and mark is not None and mark >= since
        rows = b.snapshot(since) if partial else b.snapshot()
        self._mark = mark
        if not partial and mark is not None:
            self._full_marks = [*self._full_marks[-1:], mark]
        children = children_of(rows)

        queue: list[tuple[int, Any]] = []
        live: list[TreeMember] = []
        seen: set[int] = set()
        if partial:
            # Known live members: on trust, unless this read covers them.
            for m in self._order:
                if m.pid not in rows and self._members.holds(m):
                    live.append(m)
                    seen.add(m.pid)
        queue.extend(self._members.walk_from(rows, partial))
        if self._orphans is not None:
            queue.extend(self._orphans.found(rows, children, self._members))
        queue.extend(cgroup_bracket.listed(self._cgroup, rows, self._me))

        for pid, row in descend(queue, rows, children, seen):
            m = self._members.remember(pid, row.start)
            m.pgid, m.sid = row.pgid, row.sid
            if row.state != b.DEAD:
                live.append(m)
                self._weigh(m, row.sid)
        self._order = live
        self._rows = rows
        if not partial and self._weighed:  # forget the sessions that ended
            self._weighed &= {row.sid for row in rows.values()}
        if self._kin is not None:
            self._kin.note(m.pid for m in live)
        return live

    def _weigh(self, m: TreeMember, sid: int) -> None:
        """Give the session of ``m`` the Run's niceness, once per session
        (tried once: where the kernel has no such groups, a sweep must not
        pay a write per process)."""
        if self._nice is None or sid in self._weighed:
            return
        self._weighed.add(sid)
        self._b.set_session_nice(m.pid, m.start, self._nice)

    # -- signals ------------------------------------------------------------

    def _send(self, m: TreeMember, sig: int) -> bool:
        """Signal one member (see signalling.send)."""
        return signalling.send(self._b, m, sig)

    def freeze(self) -> int:
        """SIGSTOP every process; sweep again until a sweep finds nothing
        running that has not been stopped; wait (briefly) until all have
        actually stopped. Returns how many are frozen.

        Converges because a stopped process cannot fork (a fork with a stop
        pending is undone by the kernel): each new sweep can only find
        children started before their parent's stop. The processes already
        known are stopped first, before any sweep, and a tree the daemon
        keeps sweeping needs only the processes started since to be read.
        """
        with self._lock:
            with cgroup_bracket.frozen(self._cgroup):
                # from here none of a Run with a cgroup runs its own code again
                self.held_at = time.monotonic() if self._cgroup is not None else None
                live, first_rows, late = self._stop_all()
                late |= signalling.retry_failed(live, lambda m: self._send(m, signal.SIGSTOP))
            return len(self._settle(live, first_rows, late))

    def stop_known(self) -> bool:
        """SIGSTOP the processes already known, from any thread, without
        waiting: the first step of a freeze, taken by the thread that hears
        the person's input before the engine's thread has taken the event.
        `freeze()` then completes it (new processes, the cgroup, the wait),
        or `thaw()` undoes it. False, sending nothing, when another thread
        holds the tree (a sweep or a signal round): that thread is the
        engine's, and its freeze is moments away."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._stop_known()
            self.stopped_first_at = time.monotonic()
            return True
        finally:
            self._lock.release()

    def _stop_all(self) -> tuple[list[TreeMember], dict[int, Any], set[TreeMember]]:
        """Send SIGSTOP until a sweep finds nothing new. Returns the members
        (alive as far as the sweeps know), the table the first sweep read
        (after the known ones were signalled) and the members signalled
        only after that read.

        Every sweep after the known processes are stopped finds all their
        children: the kernel undoes a fork that a stop overtakes, so each
        child is visible by the time the stop is sent. What a sweep must
        find besides is only what started since the tree was last read in
        full, and PIDs rise: so when two full sweeps were made before this
        freeze, the sweeps here read only pids above the mark of the older
        one. (Only a fork left half-done in the kernel, pid given but not
        yet visible, across both full sweeps could hide below it.) A tree
        not read in full twice yet is read in full each time.
        """
        sent = self._stop_known()
        self.signalled_at = time.monotonic()
        since = self._full_marks[0] if len(self._full_marks) == 2 else None
        live: list[TreeMember] = []
        first_rows: dict[int, Any] = {}
        late: set[TreeMember] = set()
        for round_ in range(_MAX_ROUNDS):
            live = self._sweep(since)
            if not round_:
                first_rows = self._rows
            new = [m for m in live if m not in sent]
            if not new:
                break
            for m in new:
                self._send(m, signal.SIGSTOP)
                sent.add(m)
                late.add(m)
        return live, first_rows, late

    def _stop_known(self) -> set[TreeMember]:
        """SIGSTOP every member the last sweep knew: a whole process group
        at a time where that is safe (see groups.py), the rest one by one."""
        self._grouped = groups.stop(self._order, self._my_sid, signal.SIGSTOP)
        for m in self._order:
            if m not in self._grouped:
                self._send(m, signal.SIGSTOP)
        return set(self._order)

    def _settle(
        self, members: list[TreeMember], rows: dict[int, Any], late: set[TreeMember]
    ) -> list[TreeMember]:
        """Wait (briefly) until every live member has stopped; returns the
        live ones. ``rows`` were read after the members not in ``late`` were
        signalled: those need no new read.

        SIGSTOP is acted on by the target itself when it is next scheduled,
        so right after the signals some are still 'running'. Convergence
        does not depend on this (a pending stop already blocks fork); it is
        so that a frozen tree is frozen when freeze() returns.
        """
        b = self._b
        after = {m.pid: r for m in members if m not in late and (r := rows.get(m.pid)) is not None}
        seen, gone = wait_stopped(
            b,
            members,
            after,
            _SETTLE_TIMEOUT,
            self._grouped,
            lambda m: self._send(m, signal.SIGSTOP),
        )
        self._grouped = {}
        for m in gone:
            self._members.forget(m)
        live = [m for m in members if m in seen and seen[m].state != b.DEAD]
        self._order = live
        ours = untouchable.ours(live)
        self._running = [m for m in ours if m.failed is not None or seen[m].state == b.RUNNING]
        return ours

    def thaw(self) -> int:
        """SIGCONT every process, children before parents (so a parent that
        wakes sees its children running). Returns how many were continued.

        Nothing of a frozen tree can have started since the freeze, so the
        processes known are the tree; a sweep of what started since the
        freeze's last sweep catches anything else, cheaply."""
        with self._lock:
            self._running = []
            sent: set[TreeMember] = set()
            count = 0
            for m in reversed(self._order):
                count += self._send(m, signal.SIGCONT)
                sent.add(m)
            for m in reversed(self._sweep(self._mark)):
                if m not in sent:
                    count += self._send(m, signal.SIGCONT)
                    sent.add(m)
            # Never leave one stopped: a continue that could not be sent is sent again.
            return count + len(
                signalling.retry_failed(sent, lambda m: self._send(m, signal.SIGCONT))
            )

    def term(self) -> int:
        """SIGTERM to every process, then SIGCONT to every process, so a
        frozen process wakes with the TERM already pending and acts on it."""
        with self._lock:
            live = self._sweep()
            for m in live:
                self._send(m, signal.SIGTERM)
            for m in live:
                self._send(m, signal.SIGCONT)
            return len(live)

    def kill(self, timeout: float = KILL_TIMEOUT) -> int:
        """SIGKILL every process and sweep until none is left (or
        ``timeout`` seconds pass, e.g. for a process stuck in the kernel).
        Returns how many were killed.

        The tree is frozen first: nothing can fork while the kill goes
        round, and no parent dies before its children are known (its
        orphans might otherwise land beyond this daemon's reach).
        """
        with self._lock:
            cgroup_bracket.kill(self._cgroup)  # all at once; the sweep below makes sure
            self._stop_all()  # no need to wait until they have stopped
            killed: set[TreeMember] = set()
            deadline = time.monotonic() + timeout
            pause = 0.0005
            while True:
                live = untouchable.ours(self._sweep())
                if not live:
                    break
                progressed = False
                for m in live:
                    # One whose signal could not be sent is tried again next round.
                    if m not in killed and (self._send(m, signal.SIGKILL) or m.failed is None):
                        killed.add(m)
                        progressed = True
                if not progressed:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(pause)  # the kernel is tearing them down
                    pause = min(pause * 2, 0.02)
            return len(killed)

    # -- questions ----------------------------------------------------------

    def sweep(self) -> list[psutil.Process]:
        """All live (non-zombie) processes of the Run, as psutil objects
        checked to be the very process seen (never a reused PID)."""
        with self._lock:
            return [p for m in self._sweep() if (p := m.process(self._b)) is not None]

    def alive(self) -> bool:
        """Whether any live (non-zombie) process of the Run is left that we
        may signal: one the system keeps from us cannot hold the Run open."""
        with self._lock:
            return bool(untouchable.ours(self._sweep()))

    def refused(self) -> list[dict[str, Any]]:
        """The live processes the system would not let us signal, each as
        {pid, command, why}, from what the last signals met (no sweep); and
        those that left the Run through launchd (see escaped.py), from the
        last sweep's table."""
        with self._lock:
            out = untouchable.named(m for m in self._order if self._members.holds(m))
            if self._orphans is not None and self._orphans.escaped:
                out += escaped.named(self._orphans.escaped, self._rows, self._b)
            return out

    def prepare(self) -> None:
        """Open, within the budget (handles.py), the handles the next freeze
        will signal through, so that it opens none itself: each process
        group's leader first (one signal stops the group, see groups.py),
        then every other member the last sweep found. For the daemon's
        watch, after its sweep; costs an open and a check per new member."""
        with self._lock:
            signalling.open_ahead(self._b, self._order, self._my_sid)

    def not_stopped(self) -> list[dict[str, Any]]:
        """The processes the last freeze left running although they are ours
        to stop, as {pid, command, why}, from what it met (no sweep): a
        signal that could not be sent (out of file descriptors, say), or one
        sent that the process has not yet acted on (it is in the kernel, in
        uninterruptible I/O). Empty after a freeze that held, and after a
        thaw. A freeze with any is a failed freeze: the caller says so and
        freezes again."""
        with self._lock:
            return untouchable.named_running(self._running)

    def members(self) -> list[int]:
        """The pids of the live processes the last sweep found (no sweep):
        what the watch sums the Run's memory and counts its processes over."""
        with self._lock:
            return [m.pid for m in self._order]

    def identities(self) -> list[tuple[int, float]]:
        """(pid, create_time) of every live process, create_time as psutil
        reports it, for the database (find_survivors takes them back)."""
        with self._lock:
            return [(m.pid, self._b.create_time(m.start)) for m in self._sweep()]

    def is_frozen(self) -> bool:
        """Whether every live process is stopped. False if none is left."""
        with self._lock:
            live = untouchable.ours(self._sweep())
            rows = self._rows
            return bool(live) and all(rows[m.pid].state == self._b.STOPPED for m in live)

    def close(self) -> None:
        """Release the open pidfds and remove the cgroup if it is empty (the
        processes are not touched)."""
        with self._lock:
            if self._kin is not None:
                self._kin.close()
            cgroup_bracket.remove(self._cgroup)
            self._members.close()
            self._order = []
            self._weighed = set()
            self._mark = None
            self._full_marks = []

    def __enter__(self) -> ProcessTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._kin is not None:
                self._kin.close()
            for m in self._members.values():
                signalling.drop_handle(m)
        except Exception:
            pass
