"""The guard that ends a dead daemon's Runs, and crash recovery itself.

A daemon killed with SIGKILL (the OOM killer, `kill -9`, a crash in the
interpreter) cannot end its Runs. Worse, a Run that was frozen stays stopped
for ever: nobody sends it SIGCONT, SIGTERM or SIGKILL. Recovery at the next
start handles that, but the next start may be days away.

So every daemon starts one small watchdog process. The daemon holds the write
end of a pipe (close-on-exec, so no agent ever inherits it); the watchdog
blocks reading the other end. The kernel closes the write end however the
daemon dies, and the watchdog sees end-of-file at once:

- after the line ``bye`` (a clean stop: the daemon already ended every Run)
  it just exits;
- without it, the daemon died with Runs possibly alive. The watchdog takes
  the daemon's lock (so no new daemon of the same home starts Runs under the
  same instance tag meanwhile), kills every process tagged with this home's
  `OWL_INSTANCE` or recorded as a Run's process, records the open Runs
  interrupted, and exits.

The watchdog is a child of the daemon but carries neither `OWL_RUN_ID` nor
`OWL_INSTANCE`, so it is never part of a Run tree, never found as a
survivor, and never killed with one. It runs in a session of its own and
ignores SIGINT/SIGHUP/SIGTERM, so a Ctrl-C or a hang-up that reaches the
daemon's terminal group stops the daemon cleanly (which then says ``bye``)
instead of killing the guard first.

A daemon that is *stopped* (SIGSTOP; it ignores the terminal's stops) is
not dead, but it cannot keep the grace window's promise either. While it is
stopped, the watchdog does it in its place: each frozen Run whose grace
window (recorded as wall-clock `grace_ends_at`) has passed is ended, TERM
then KILL 5 s later, and the log says so. The daemon, once continued, finds
the tree gone and records the Run as usual.

Crash recovery itself, which the guard runs on the daemon's death and the
daemon at every start, is `owl.daemon.crash_recovery`.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from owl.daemon.crash_recovery import recover
from owl.rules import lifecycle
from owl.settings import daemonlock

log = logging.getLogger("owl.watchdog")

CLEAN = b"bye\n"
# The env vars that make a process part of a Run; the guard must carry none.
_TAGS = ("OWL_RUN_ID", "OWL_INSTANCE", "OWL_JOB_ID")
_LOCK_WAIT = 10.0
WATCH_EVERY = 0.5  # how often the guard looks whether the daemon is stopped
KILL_DELAY = lifecycle.KILL_DELAY


class Guard:
    """The daemon's end of the watchdog: its pid, and the clean-stop word."""

    def __init__(self, popen: subprocess.Popen[bytes], wfd: int) -> None:
        self.popen = popen
        self._wfd: int | None = wfd

    @property
    def pid(self) -> int:
        return self.popen.pid

    def release(self) -> None:
        """Tell the watchdog the daemon stopped cleanly; it exits without touching anything.

        Call only after every Run has ended: a daemon that could not end its
        Runs should just close (or die), and the watchdog ends them."""
        if self._wfd is None:
            return
        try:
            os.write(self._wfd, CLEAN)
        except OSError:
            pass
        self.abandon()
        try:
            self.popen.wait(5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - a wedged guard
            log.warning("the watchdog (pid %s) did not exit", self.popen.pid)

    def abandon(self) -> None:
        """Close our end without the clean word: the watchdog then cleans up."""
        if self._wfd is not None:
            try:
                os.close(self._wfd)
            except OSError:
                pass
            self._wfd = None


def start(db: Path, lock: Path, instance: str, logs: Path | None = None) -> Guard:
    """Start the watchdog for a daemon whose lock is `lock`, database `db` and
    Run logs `logs` (where the start-of-Run snapshots are kept).

    Through `bundle.module_argv`: inside an app bundle sys.executable takes no `-m`."""
    from owl import tree
    from owl.bundle import module_argv

    rfd, wfd = os.pipe()  # both close-on-exec; only rfd is passed on
    env = {k: v for k, v in os.environ.items() if k not in _TAGS}
    try:
        # In a session of its own, so the daemon's reaper must be told it is ours.
        with tree.SPAWN_LOCK:
            popen = subprocess.Popen(
                [
                    *module_argv("owl.daemon.watchdog"),
                    str(rfd),
                    str(db),
                    str(lock),
                    instance,
                    *([str(logs)] if logs is not None else []),
                ],
                pass_fds=(rfd,),
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
            tree.own(popen, locked=True)
    finally:
        os.close(rfd)
    return Guard(popen, wfd)


def _take_lock(lock: Path) -> int | None:
    """The daemon lock, once the dead daemon's hold on it is gone; None if a new
    daemon took it first (it recovers by itself)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    if daemonlock.take_now(fd, _LOCK_WAIT):
        return fd
    os.close(fd)
    return None


def _after_death(db: Path, lock: Path, instance: str, logs: Path | None) -> None:
    fd = _take_lock(lock)
    if fd is None:
        log.warning("another daemon holds %s: it recovers the Runs itself", lock)
        return
    try:
        from owl.store.db import Store
        from owl.errors import StoreError

        try:
            store = Store(db)
        except (StoreError, OSError) as e:
            # Without the database, the tag alone still finds every process.
            log.warning("cannot record the Runs interrupted (%s); killing by tag only", e)
            from owl import tree

            found = tree.find_survivors("OWL_INSTANCE", [instance])
            for p in tree.end_processes(found)[1]:
                log.warning("pid %s (%s) was left running: %s", p["pid"], p["command"], p["why"])
            return
        try:
            recover(store, instance, logs)
        finally:
            store.close()
    finally:
        os.close(fd)  # releases the lock


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (by SIGSTOP or a tracer), not just asleep."""
    import psutil

    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


class StandIn:
    """Keeps the grace window's promise for a daemon that is stopped."""

    def __init__(self, daemon: int, db: Path, instance: str) -> None:
        self.daemon = daemon
        self.db = db
        self.instance = instance
        self.ended: set[int] = set()
        self._said_stopped = False

    def check(self, now: float | None = None) -> list[int]:
        """End the frozen Runs whose window passed, if the daemon is stopped;
        returns their ids."""
        if not _stopped(self.daemon):
            self._said_stopped = False
            return []
        due = [
            r
            for r in self._frozen_runs()
            if r[0] not in self.ended and r[2] <= (time.time() if now is None else now)
        ]
        if not self._said_stopped:
            self._said_stopped = True
            log.warning(
                "the daemon (pid %s) is stopped; its frozen Runs will still end "
                "when their grace window passes",
                self.daemon,
            )
        for run_id, pids, _ in due:
            log.warning(
                "the daemon (pid %s) is stopped and run %s's grace window has "
                "passed: ending it in the daemon's place",
                self.daemon,
                run_id,
            )
            self.ended.add(run_id)
            self._end(run_id, pids)
        return [r[0] for r in due]

    def _frozen_runs(self) -> list[tuple[int, list, float]]:
        try:
            with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1.0) as db:
                rows = db.execute(
                    "SELECT id, pids, grace_ends_at FROM runs WHERE "
                    "ended_at IS NULL AND state='frozen' AND "
                    "grace_ends_at IS NOT NULL"
                ).fetchall()
        except sqlite3.Error as e:
            log.warning("cannot read the Runs: %s", e)
            return []
        return [(r[0], json.loads(r[1] or "[]"), float(r[2])) for r in rows]

    def _end(self, run_id: int, pids: list) -> None:
        """TERM (with CONT), and 5 s later KILL, every process of the Run."""
        from owl import tree

        found = tree.find_survivors(
            "OWL_RUN_ID",
            [str(run_id)],
            [tuple(p) for p in pids],
            instance=("OWL_INSTANCE", self.instance),
        )
        with tree.ProcessTree(None) as pt:
            for proc in found:
                try:
                    pt.add_leader(proc.pid, create_time=proc.create_time())
                except Exception:
                    continue
            pt.term()
            deadline = time.monotonic() + KILL_DELAY
            while pt.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if pt.alive():
                pt.kill()
            for p in pt.refused():
                log.warning("pid %s (%s) was left running: %s", p["pid"], p["command"], p["why"])


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s owl.watchdog %(levelname)s %(message)s",
    )
    rfd, db, lock, instance = int(argv[0]), Path(argv[1]), Path(argv[2]), argv[3]
    logs = Path(argv[4]) if len(argv) > 4 else None
    daemon = os.getppid()
    stand_in = StandIn(daemon, db, instance)
    said = b""
    while True:
        ready, _, _ = select.select([rfd], [], [], WATCH_EVERY)
        if not ready:
            stand_in.check()
            continue
        try:
            chunk = os.read(rfd, 64)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if not chunk:
            break
        said += chunk
    if CLEAN in said:
        return 0
    log.warning("the daemon died; ending its Runs")
    _after_death(db, lock, instance, logs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
