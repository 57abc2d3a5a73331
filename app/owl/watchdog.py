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

`recover` is the same clean-up the daemon runs at start: one function, so the
guard and a restart can never disagree about what a leftover is. Its last
step compares each Run's start-of-Run snapshot left on disk (`owl.outsidekeep`)
with the project, so what an agent changed outside its branch before the
crash is recorded on its Run all the same.
"""

from __future__ import annotations

import fcntl
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
from typing import Any

log = logging.getLogger("owl.watchdog")

CRASH_REASON = "the daemon stopped before this Run ended"
CLEAN = b"bye\n"
# The env vars that make a process part of a Run; the guard must carry none.
_TAGS = ("OWL_RUN_ID", "OWL_INSTANCE", "OWL_JOB_ID")
_LOCK_WAIT = 10.0
WATCH_EVERY = 0.5          # how often the guard looks whether the daemon is stopped
KILL_DELAY = 5.0           # as the lifecycle's: the guarantee behind the window
# How long the comparisons of a recovery may take in all: the guard holds the
# daemon lock meanwhile, and a new daemon waits for it (daemon.LOCK_WAIT).
OUTSIDE_WAIT = 5.0


def recover(store: Any, instance: str, logs: Path | None = None) -> tuple[list[int], int]:
    """Kill every leftover process of this home's Runs; close open Runs interrupted.

    A leftover is any live process tagged `OWL_INSTANCE=instance` (every process
    of every Run carries it), any process whose (pid, create time) the
    database recorded for an open Run, and everything descended from those.
    Must run while holding the daemon lock: then no live Run of this home
    exists, so every tagged process is a leftover (and every snapshot kept
    in `logs`, a Run's whose comparison was never recorded). Returns (the
    Run ids recorded interrupted, how many processes were killed).
    """
    from owl import tree

    open_runs = store.open_runs()
    identities = [tuple(p) for r in open_runs for p in r["pids"]]
    groups = tree.cgroup.leftovers(instance)
    # What a cgroup kill ended counts as killed too: the sweep after it finds
    # none of those still to kill, yet the Run was ended by SIGKILL all the same.
    by_group: set[int] = set()
    for group in groups:
        held = group.pids()
        if group.kill():        # every process of the Run, wherever it went
            by_group.update(held)
    survivors = [p for p in tree.find_survivors("OWL_INSTANCE", [instance], identities)
                 if p.pid not in by_group]
    killed, refused = tree.end_processes(survivors) if survivors else (0, [])
    killed += len(by_group)
    for group in groups:
        group.remove()
    from owl import setup as setupmod

    setupmod.recover(store)     # what setups the crash cut short had made
    ids: list[int] = []
    if open_runs:
        ended_by = {r["id"]: ("sigkill" if killed else None) for r in open_runs}
        _name_untouchable(store, open_runs, refused)
        ids = store.recover(CRASH_REASON, ended_by)
    if ids or killed:
        log.warning("recovered from a crash: %d Run(s) recorded interrupted, %d leftover "
                    "process(es) killed", len(ids), killed)
    try:                            # after the kills: no agent changes anything more
        recover_outside(store, logs)
    except Exception as e:          # its files stay for the next start; this one goes on
        log.warning("could not compare what the crashed Runs changed outside their "
                    "branches: %s", e)
    return ids, killed


def recover_outside(store: Any, logs: Path | None) -> list[int]:
    """Record what each Run whose start's snapshot is left in `logs` changed
    outside its branch (as `runend.record_outside` would have), then remove
    the file; returns those Runs' ids. A file stays only if its record could
    not be written, for the next recovery to try again."""
    from owl import outsidekeep

    deadline, done = time.monotonic() + OUTSIDE_WAIT, []
    for run_id, path in outsidekeep.left(logs):
        run = store.run(run_id)
        job = store.job(run["job_id"]) if run else None
        if run is None or job is None or run["outside"] is not None:
            outsidekeep.remove(path)        # recorded already, or not this database's Run
            continue
        found = _kept_changes(store, run_id, job, path, deadline)
        if found is None:
            log.warning("job %s run %s: the project's refs, config and hooks could not be "
                        "read at its start, so nothing was compared", run["job_id"], run_id)
        elif not _record_outside(store, run, found):
            continue
        outsidekeep.remove(path)
        done.append(run_id)
    return done


def _kept_changes(store: Any, run_id: int, job: dict, path: Path,
                  deadline: float) -> list[dict] | None:
    """The kept snapshot compared with its project now (None: never read at the start)."""
    from owl import outside, outsidekeep

    try:
        kept_id, project, before = outsidekeep.read(path)
        if (kept_id, project) != (run_id, job["project"]):
            raise ValueError(f"it is run {kept_id}'s of {project}")
    except (OSError, ValueError) as e:
        return [outside.unknown(str(e), what="the snapshot Owl kept of its start")]
    ignore = outside.owned_ref(job.get("branch"), store.branches(project))
    return outsidekeep.compare_by(before, Path(project), ignore, deadline)


def _record_outside(store: Any, run: dict, found: list[dict]) -> bool:
    from owl import outside

    try:
        store.set_run(run["id"], outside=json.dumps(found))
    except Exception as e:          # a full disk: the file stays for the next start
        log.warning("run %s: could not record what it changed outside its branch: %s",
                    run["id"], e)
        return False
    if found:
        log.warning("job %s run %s (found after the crash): %s", run["job_id"], run["id"],
                    outside.summary(found))
    return True


def _name_untouchable(store: Any, open_runs: list[dict], refused: list[dict]) -> None:
    """Record on each Run the leftovers the system would not let us kill.

    A process is the Run's whose recorded pids name it (its environment,
    and so its tag, is unreadable to us); with one open Run, all are its."""
    for p in refused:
        log.warning("pid %s (%s) was left running: %s", p["pid"], p["command"], p["why"])
    for r in open_runs:
        mine = {pid for pid, _ in r["pids"]}
        named = [p for p in refused if p["pid"] in mine or len(open_runs) == 1]
        if named:
            known = {p["pid"] for p in r.get("untouchable") or []}
            merged = list(r.get("untouchable") or []) + [p for p in named
                                                          if p["pid"] not in known]
            try:
                store.set_run(r["id"], untouchable=merged)
            except Exception as e:  # a record is a courtesy; recovery goes on
                log.warning("run %s: could not record what was left running: %s", r["id"], e)


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

    rfd, wfd = os.pipe()          # both close-on-exec; only rfd is passed on
    env = {k: v for k, v in os.environ.items() if k not in _TAGS}
    try:
        # In a session of its own, so the daemon's reaper must be told it is ours.
        with tree.SPAWN_LOCK:
            popen = subprocess.Popen(
                [*module_argv("owl.watchdog"), str(rfd), str(db), str(lock), instance,
                 *([str(logs)] if logs is not None else [])],
                pass_fds=(rfd,), env=env, stdin=subprocess.DEVNULL, start_new_session=True,
                close_fds=True)
            tree.own(popen, locked=True)
    finally:
        os.close(rfd)
    return Guard(popen, wfd)


def _take_lock(lock: Path) -> int | None:
    """The daemon lock, once the dead daemon's hold on it is gone; None if a new
    daemon took it first (it recovers by itself)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + _LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.02)


def _after_death(db: Path, lock: Path, instance: str, logs: Path | None) -> None:
    fd = _take_lock(lock)
    if fd is None:
        log.warning("another daemon holds %s: it recovers the Runs itself", lock)
        return
    try:
        from owl.store import Store
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
        os.close(fd)      # releases the lock


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (by SIGSTOP or a tracer), not just asleep."""
    import psutil

    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED,
                                                 psutil.STATUS_TRACING_STOP)
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
        due = [r for r in self._frozen_runs() if r[0] not in self.ended
               and r[2] <= (time.time() if now is None else now)]
        if not self._said_stopped:
            self._said_stopped = True
            log.warning("the daemon (pid %s) is stopped; its frozen Runs will still end "
                        "when their grace window passes", self.daemon)
        for run_id, pids, _ in due:
            log.warning("the daemon (pid %s) is stopped and run %s's grace window has "
                        "passed: ending it in the daemon's place", self.daemon, run_id)
            self.ended.add(run_id)
            self._end(run_id, pids)
        return [r[0] for r in due]

    def _frozen_runs(self) -> list[tuple[int, list, float]]:
        try:
            with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1.0) as db:
                rows = db.execute("SELECT id, pids, grace_ends_at FROM runs WHERE "
                                  "ended_at IS NULL AND state='frozen' AND "
                                  "grace_ends_at IS NOT NULL").fetchall()
        except sqlite3.Error as e:
            log.warning("cannot read the Runs: %s", e)
            return []
        return [(r[0], json.loads(r[1] or "[]"), float(r[2])) for r in rows]

    def _end(self, run_id: int, pids: list) -> None:
        """TERM (with CONT), and 5 s later KILL, every process of the Run."""
        from owl import tree

        found = tree.find_survivors("OWL_RUN_ID", [str(run_id)],
                                    [tuple(p) for p in pids],
                                    instance=("OWL_INSTANCE", self.instance))
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
                log.warning("pid %s (%s) was left running: %s", p["pid"], p["command"],
                            p["why"])


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s owl.watchdog %(levelname)s %(message)s")
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
