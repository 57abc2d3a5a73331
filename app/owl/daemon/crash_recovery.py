"""Crash recovery: what a daemon that died left behind, ended and recorded.

`recover` kills every leftover process of this home's Runs (tagged with its
instance, or recorded for an open Run) and records those Runs interrupted,
their Jobs back in the queue. The watchdog (`owl.daemon.watchdog`) runs it
when the daemon dies, the daemon at every start. It also finishes (or undoes) a drop or accept the crash cut short,
from the intent the verb recorded before its git ran (`owl.verbs.recovery`).

`recover` is the same clean-up the daemon runs at start: one function, so the
guard and a restart can never disagree about what a leftover is. Its last
step compares each Run's start-of-Run snapshot left on disk (`owl.git.outsidekeep`)
with the project, so what an agent changed outside its branch before the
crash is recorded on its Run all the same.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("owl.watchdog")

CRASH_REASON = "the daemon stopped before this Run ended"
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
        if group.kill():  # every process of the Run, wherever it went
            by_group.update(held)
    survivors = [
        p
        for p in tree.find_survivors("OWL_INSTANCE", [instance], identities)
        if p.pid not in by_group
    ]
    killed, refused = tree.end_processes(survivors) if survivors else (0, [])
    killed += len(by_group)
    for group in groups:
        group.remove()
    tree.cgroup_caps.clear_leftovers(instance)  # the v1 cgroups of its Runs' caps
    from owl.git import setup as setupmod

    setupmod.recover(store)  # what setups the crash cut short had made
    from owl.verbs import recovery as verbsrecovery

    verbsrecovery.finish(store)  # the drops and accepts it cut short
    ids: list[int] = []
    if open_runs:
        ended_by = {r["id"]: ("sigkill" if killed else None) for r in open_runs}
        _name_untouchable(store, open_runs, refused)
        ids = store.recover(CRASH_REASON, ended_by)
    _land(store, open_runs)
    if ids or killed:
        log.warning(
            "recovered from a crash: %d Run(s) recorded interrupted, %d leftover "
            "process(es) killed",
            len(ids),
            killed,
        )
    try:  # after the kills: no agent changes anything more
        recover_outside(store, logs)
    except Exception as e:  # its files stay for the next start; this one goes on
        log.warning("could not compare what the crashed Runs changed outside their branches: %s", e)
    return ids, killed


def _land(store: Any, open_runs: list[dict]) -> None:
    """Bring the branch of each Job whose Run the crash cut short from its own
    store into the project (`owl.git.storing.land`), its git files checked
    first: what the agent committed reaches the project's branch now, not
    only at the Job's next Run."""
    from owl.git import jobstore, storing

    for job_id in sorted({r["job_id"] for r in open_runs}):
        job = store.job(job_id)
        if not job or not job.get("worktree") or not job.get("branch"):
            continue
        try:
            places = jobstore.places(job["project"], job["worktree"])
            found = jobstore.verify(places)
            if found:
                jobstore.restore(places, found)
                log.warning("job %s: its git files were changed, put back: %s", job_id, found)
            storing.land(Path(job["project"]), places, job["branch"])
        except Exception as e:  # noqa: BLE001 - its next Run's setup tries again
            log.warning("job %s: its branch could not be brought in after the crash: %s", job_id, e)


def recover_outside(store: Any, logs: Path | None) -> list[int]:
    """Record what each Run whose start's snapshot is left in `logs` changed
    outside its branch (as `runend.record_outside` would have), then remove
    the file; returns those Runs' ids. A file stays only if its record could
    not be written, for the next recovery to try again."""
    from owl.git import outsidekeep

    deadline, done = time.monotonic() + OUTSIDE_WAIT, []
    for run_id, path in outsidekeep.left(logs):
        run = store.run(run_id)
        job = store.job(run["job_id"]) if run else None
        if run is None or job is None or run["outside"] is not None:
            outsidekeep.remove(path)  # recorded already, or not this database's Run
            continue
        found = _kept_changes(store, run_id, job, path, deadline)
        if found is None:
            log.warning(
                "job %s run %s: the project's refs, config and hooks could not be "
                "read at its start, so nothing was compared",
                run["job_id"],
                run_id,
            )
        elif not _record_outside(store, run, found):
            continue
        outsidekeep.remove(path)
        done.append(run_id)
    return done


def _kept_changes(
    store: Any, run_id: int, job: dict, path: Path, deadline: float
) -> list[dict] | None:
    """The kept snapshot compared with its project now (None: never read at the start)."""
    from owl.git import outside
    from owl.git import outsidekeep

    try:
        kept_id, project, before = outsidekeep.read(path)
        if (kept_id, project) != (run_id, job["project"]):
            raise ValueError(f"it is run {kept_id}'s of {project}")
    except (OSError, ValueError) as e:
        return [outside.unknown(str(e), what="the snapshot Owl kept of its start")]
    ignore = outside.owned_ref(job.get("branch"), store.branches(project))
    from owl.git.gitdir import store_path

    own = str(store_path(job["worktree"])) if job.get("worktree") else None
    return outsidekeep.compare_by(before, Path(project), ignore, deadline, own)


def _record_outside(store: Any, run: dict, found: list[dict]) -> bool:
    from owl.git import outsidewords

    try:
        store.set_run(run["id"], outside=json.dumps(found))
    except Exception as e:  # a full disk: the file stays for the next start
        log.warning("run %s: could not record what it changed outside its branch: %s", run["id"], e)
        return False
    if found:
        log.warning(
            "job %s run %s (found after the crash): %s",
            run["job_id"],
            run["id"],
            outsidewords.summary(found),
        )
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
            merged = list(r.get("untouchable") or []) + [p for p in named if p["pid"] not in known]
            try:
                store.set_run(r["id"], untouchable=merged)
            except Exception as e:  # a record is a courtesy; recovery goes on
                log.warning("run %s: could not record what was left running: %s", r["id"], e)
