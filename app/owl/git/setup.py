"""Setting up a Job's workspace, off the engine thread.

Why a room of its own: making a worktree runs git, which can take as long as
the repository, the disk or the file system like (a large checkout, a
network home). The engine must never wait on it: while one Job is set up,
input must still freeze every other Run at once. So each setup runs on a
thread of its own and comes back to the engine as an event: `Ready` (the
workspace, the checks from the Job's base commit, the agent's driver) or
`Failed` (the reason, in words, for the Job's `blocked`), or `Cancelled`.

Nothing half-made is left: before git makes a new worktree and branch, their
names are recorded (`record`, written by the engine in the `setups`
setting); a failed or cancelled setup removes what it made, and so does the
next daemon start for a setup a crash cut short (`recover`). Every git the
setup runs carries the daemon's instance tag and a tag of its own, so a
cancel ends exactly its processes, and crash recovery finds them too.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from owl.git import guards
from owl.git import jobstore
from owl.git import outside
from owl.git import safegit
from owl.git import storing
from owl.git import workspace
from owl.settings import project as projectmod

log = logging.getLogger("owl.setup")

_setups = itertools.count(1)
SETTING = "setups"  # {job id: {"branch": ..., "worktree": ...}} of fresh setups under way


@dataclass(frozen=True)
class Ready:
    job_id: int
    ws: workspace.Workspace
    settings: projectmod.ProjectSettings
    driver: Any
    made_from: str | None
    exempt: bool
    commits: str = ""  # the branch's own commits, for a later Run's prompt
    # The project's refs, config and hooks as the Run starts (owl.git.outside):
    # taken here, as the last step, since a project with many refs (or on a
    # slow disk) makes even these file reads too slow for the engine thread.
    outside_before: Any = None
    # Where the Job's git lives (owl.git.jobstore), from Owl's records: every
    # bind of the Run and of its checks is made from this, never from a file
    # in the worktree.
    places: jobstore.Places | None = None


@dataclass(frozen=True)
class Failed:
    job_id: int
    reason: str
    exempt: bool


@dataclass(frozen=True)
class Cancelled:
    job_id: int


Result = Ready | Failed | Cancelled


@dataclass
class Request:
    """What a setup needs, read on the engine thread before it begins."""

    job: dict
    agent_config: dict
    prefix: str
    worktrees: Path
    instance: str
    exempt: bool


class _Setup:
    def __init__(self, req: Request) -> None:
        self.req = req
        # Unique to this setup: a cancel ends its processes, never a later setup's
        # of the same Job (the kill runs on a thread and may come late).
        self.tag = f"{req.instance}-{req.job['id']}-{next(_setups)}"
        self.cancelled = threading.Event()


class Setups:
    """The setups under way, one thread each.

    ``deliver(result)`` is called from the setup's thread (the engine puts
    it on its queue); ``record(job_id, names_or_None)`` too, and must return
    only once the names are safely written (the engine does it on its own
    thread and answers)."""

    def __init__(
        self, deliver: Callable[[Result], None], record: Callable[[int, dict | None], None]
    ) -> None:
        self._deliver = deliver
        self._record = record
        self._lock = threading.Lock()
        self._under_way: dict[int, _Setup] = {}
        self._made: set[str] = set()  # every branch a setup here named for its Job
        # Jobs being set up that `owl start` asked for meanwhile: their Run
        # starts as `owl start` starts one (the engine's thread alone uses it)
        self.asked: set[int] = set()

    def branches_made(self) -> frozenset[str]:
        """The branches setups in this process made (or are making) for their
        Jobs: Owl's own, so never news in a Run's report of what changed
        outside its branch, even before the Job's record names them."""
        with self._lock:
            return frozenset(self._made)

    def jobs(self) -> dict[int, str]:
        """Job id -> project of every setup under way."""
        with self._lock:
            return {j: s.req.job["project"] for j, s in self._under_way.items()}

    def busy(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._under_way

    def begin(self, req: Request) -> None:
        s = _Setup(req)
        with self._lock:
            if req.job["id"] in self._under_way:
                return
            self._under_way[req.job["id"]] = s
        threading.Thread(
            target=self._run, args=(s,), daemon=True, name=f"owl-setup-{req.job['id']}"
        ).start()

    def done(self, job_id: int) -> None:
        """The engine has taken the result: the Job is no longer being set up."""
        with self._lock:
            self._under_way.pop(job_id, None)

    def cancel_all(self) -> None:
        """End every setup: its git processes are killed (on a thread, as the
        kill waits for them), and it reports Cancelled once it has cleaned up."""
        with self._lock:
            setups = list(self._under_way.values())
        for s in setups:
            s.cancelled.set()
            threading.Thread(
                target=_end_processes, args=(s.tag,), daemon=True, name="owl-setup-cancel"
            ).start()

    # ------------------------------------------------------------ the work

    def _run(self, s: _Setup) -> None:
        req = s.req
        job_id = req.job["id"]
        try:
            with safegit.tagged(OWL_INSTANCE=req.instance, OWL_SETUP=s.tag):
                result = self._work(s)
        except Exception as e:  # a bug must still end the setup, in words
            log.exception("job %s: setup failed", job_id)
            result = Failed(job_id, f"setup failed: {e}", req.exempt)
        self._deliver(result)

    def _work(self, s: _Setup) -> Result:
        from owl import agents
        from owl.agents.handoff import branch_log

        req, job = s.req, s.req.job
        job_id, project = job["id"], Path(job["project"])
        fresh: dict | None = None
        try:
            driver = agents.get_driver(job["agent"], req.agent_config)
            problem = driver.problem()
            if problem:
                raise workspace.WorkspaceError(problem)
            branch = job["branch"]
            worktree = Path(job["worktree"]) if job["worktree"] else None
            if branch is None or worktree is None:
                gone = workspace.project_problem(project)
                if gone:
                    raise workspace.WorkspaceError(gone)
                branch, worktree = workspace.fresh_names(project, job_id, req.prefix, req.worktrees)
                fresh = {"branch": branch, "worktree": str(worktree)}
                with self._lock:
                    self._made.add(branch)
                self._record(job_id, fresh)
            if s.cancelled.is_set():
                raise _Cancel()
            ws = storing.ensure(
                project,
                job_id,
                req.prefix,
                req.worktrees,
                branch=branch,
                worktree=worktree,
                base=job["base"],
            )
            if s.cancelled.is_set():
                raise _Cancel()
            places = jobstore.places(project, ws.worktree)
            tampered = _tampered(job_id, places)
            if tampered:
                return Failed(job_id, tampered, req.exempt)
            try:
                storing.land(project, places, ws.branch)
            except jobstore.StoreError as e:
                raise workspace.WorkspaceError(str(e)) from None
            if places.store is not None:
                storing.mirror(project, places.store, ws.branch)
            settings = projectmod.load(project, ws.base) if ws.base else projectmod.load(project)
            made = _made_from(project, job)
            commits = branch_log(ws.worktree, ws.base) if job["branch"] and ws.base else ""
        except _Cancel:
            self._undo(project, fresh)
            return Cancelled(job_id)
        except (workspace.WorkspaceError, projectmod.ProjectError, ValueError, OSError) as e:
            self._undo(project, fresh)
            if s.cancelled.is_set():
                return Cancelled(job_id)
            return Failed(job_id, _reason(job, project, e), req.exempt)
        before = outside.take(project, places.store)
        return Ready(job_id, ws, settings, driver, made, req.exempt, commits, before, places)

    def _undo(self, project: Path, fresh: dict | None) -> None:
        if fresh is not None:
            remove_half_made(project, fresh)


class _Cancel(Exception):
    pass


def _tampered(job_id: int, places: jobstore.Places) -> str | None:
    """Why the Job cannot run: its worktree's git files are not as Owl made
    them (put back now, the Job blocked until the person looks), or None."""
    found = jobstore.verify(places)
    if not found:
        return None
    failed = jobstore.restore(places, found)
    log.warning("job %s: its git files were changed: %s", job_id, found)
    return jobstore.tampered_reason(job_id, found, failed)


def _end_processes(tag: str) -> None:
    from owl import tree

    found = tree.find_survivors("OWL_SETUP", [tag])
    if found:
        tree.kill_processes(found)


def _reason(job: dict, project: Path, e: Exception) -> str:
    """Why the setup failed, with what the person can do where that is known."""
    broken = (
        workspace.reach_problem(project, Path(job["worktree"]))
        if job["worktree"]
        else workspace.project_problem(project)
    )
    if broken:
        return guards.broken_reason(job["id"], job["branch"], broken)
    return f"setup failed: {e}"


def _made_from(project: Path, job: dict) -> str | None:
    """The branch a new worktree was made from, recorded once (for accept --merge)."""
    if job.get("base") is not None or job.get("base_branch"):
        return None
    from owl.review.merge import current_branch

    try:
        return current_branch(project)
    except (OSError, workspace.WorkspaceError):
        return None


def remove_half_made(project: Path, fresh: dict) -> None:
    """Remove a worktree and branch a setup made (or began to make) for itself."""
    path = Path(fresh["worktree"])
    try:
        if path.exists():
            workspace.remove(project, path, force=True)
    except (workspace.WorkspaceError, OSError) as e:
        log.warning("could not remove the half-made worktree %s: %s", path, e)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    try:
        with workspace.changing_worktrees(project):
            workspace.git(project, "worktree", "prune", check=False)
        if workspace.branch_tip(project, fresh["branch"]) is not None:
            workspace.delete_branch(project, fresh["branch"])
    except (workspace.WorkspaceError, OSError) as e:
        log.warning("could not remove the half-made branch %s: %s", fresh["branch"], e)


def recover(store: Any) -> list[int]:
    """At start (under the daemon lock, after the leftovers were killed): remove
    what setups a crash cut short had made. Returns their Job ids."""
    pending = store.setting(SETTING, {}) or {}
    done = []
    for job_id, fresh in list(pending.items()):
        job = store.job(int(job_id))
        if job is not None and job.get("worktree") == fresh.get("worktree"):
            continue  # the setup had finished: the Job owns it
        project = Path(job["project"]) if job else None
        if project is not None and project.is_dir():
            remove_half_made(project, fresh)
        done.append(int(job_id))
    if pending:
        store.set_setting(SETTING, None)
    if done:
        log.warning(
            "removed what %d interrupted setup(s) had made: jobs %s",
            len(done),
            ", ".join(map(str, done)),
        )
    return done
