"""The slow halves of verbs, done on the caller's thread, never the engine's.

Why: a verb arrives on a socket thread (or the tray's) and is carried out on
the engine thread, which must never wait on git or a project's files. So a
verb that needs git does it in two halves: what changes state runs on the
engine thread and returns its answer with a `LATER` step; `finish` then
runs that step here, on the caller's thread, to complete the answer (a
branch's commits and diffstat, a dropped Job's worktree removed). And `owl
add` reads its project (is it a repository, its `.owl.toml`, the agent)
here first, so the engine only writes the new Job.

A verb whose git must come *between* two looks at the state (drop's check
for unkept work, accept's merge, verify's checks) is strung together here
from halves in `owl.verbs`: the engine checks the Job's state and holds it,
git runs here, and the engine checks again and changes the state. The hold
is let go whatever happens here, so a failing git never leaves a Job stuck.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from owl import guards, outside, project as projectmod, workspace
from owl.errors import Refused

LATER = "_later"        # a key of an answer: a callable(answer) -> answer, run off the engine


def finish(answer: Any) -> Any:
    """Run the answer's LATER step, if it has one, and return the full answer."""
    if isinstance(answer, dict) and LATER in answer:
        later = answer.pop(LATER)
        answer = later(answer)
    return answer


def prepare_add(cfg: Any, prompt: str, project: str, agent: str | None) -> dict:
    """What `owl add` needs to know about its project, found with git: the
    repository's root, its `.owl.toml`, the agent and whether it can run."""
    from owl import agents

    root = workspace.project_root(project)
    try:
        settings = projectmod.load(Path(root))
    except projectmod.ProjectError as e:
        raise Refused(str(e)) from None
    except (OSError, workspace.WorkspaceError):
        settings = projectmod.ProjectSettings()
    name = (agent or cfg.projects.get(str(root), {}).get("agent") or settings.agent
            or cfg.default_agent)
    try:
        driver = agents.get_driver(name, cfg.agent(name))
    except ValueError as e:
        raise Refused(str(e)) from None
    problem = driver.problem()
    if problem:
        raise Refused(problem)
    return {"root": str(root), "agent": name, "prompt": prompt}


@contextlib.contextmanager
def _held(engine: Any, job_id: int) -> Iterator[None]:
    """Let go of the Job's hold on the way out, however this half ends."""
    try:
        yield
    finally:
        try:
            engine.call(lambda: engine.verbs.release(job_id))
        except Refused:             # the daemon is stopping: nothing is held any more
            pass


def drop(engine: Any, job_id: int, force: bool) -> dict:
    """`owl jobs drop`: refuse if git finds work nobody kept (without `force`),
    then drop; a Job with no Run going has its workspace removed here."""
    e = engine
    begun = e.call(lambda: e.verbs.drop_begin(job_id, force))
    if "job" not in begun:
        return begun
    with _held(e, job_id):
        refusal = guards.drop_refusal(begun["job"], force)
        if refusal:
            raise Refused(refusal)
        answer = e.call(lambda: e.verbs.drop_commit(job_id, force))
    job = answer.pop("workspace", None)
    if job is not None:
        answer["message"] += guards.drop_workspace(job)
    return answer


def accept(engine: Any, job_id: int, merge: bool, delete_branch: bool) -> dict:
    """`owl jobs accept [--merge] [--delete-branch]`: keep a Job's work.

    With `merge`, its branch is brought into its base branch first (see
    `owl.review.merge`); with `delete_branch`, the branch goes once merged.
    The worktree is removed before the Job is recorded done, so a removal that
    fails leaves it in review with the reason."""
    from owl.review import merge as mergemod

    e = engine
    job = e.call(lambda: e.verbs.accept_begin(job_id))
    if job is None:
        return e.call(lambda: e.verbs.accepted_already(job_id))
    project = Path(job["project"])
    with _held(e, job_id):
        refusal = guards.accept_refusal(job)
        if refusal:
            raise Refused(refusal)
        merged = _merge(e, project, job) if merge else None
        if delete_branch:
            mergemod.require_merged(project, job)     # refuses before anything changes
        worktree = Path(job["worktree"]) if job["worktree"] else None
        try:
            workspace.remove(project, worktree)
        except (workspace.WorkspaceError, OSError) as err:
            raise Refused(f"cannot accept job {job_id}: its worktree could not be removed "
                          f"({err})") from None
        answer = e.call(lambda: e.verbs.accept_commit(job_id, merged, delete_branch))
    if delete_branch:
        mergemod.delete_merged_branch(project, job)
    return answer


def _merge(e: Any, project: Path, job: dict) -> str:
    """Merge the Job's branch; live Runs in the project take the refs Owl
    moved as their starting point, so no agent is said to have moved them."""
    from owl.review import merge as mergemod

    before = outside.take(project)
    try:
        return mergemod.merge(project, job)[1]
    finally:
        moved = outside.moves(before, outside.take(project))
        e.call(lambda: e.own_ref_moves(project, moved))


def verify(engine: Any, job_id: int) -> dict:
    """`owl jobs verify`: the Job's checks, as the commit it started from
    declares them (an agent can move the base branch), run again."""
    e = engine
    job = e.call(lambda: e.verbs.verify_begin(job_id))
    with _held(e, job_id):
        project = Path(job["project"])
        try:
            settings = projectmod.load(project, job["base"] or "HEAD")
        except (projectmod.ProjectError, workspace.WorkspaceError, OSError) as err:
            raise Refused(str(err)) from None
        if not settings.checks:
            raise Refused(f"{job['project']} declares no checks ([[checks]] in .owl.toml on its "
                          "base branch)")
        return e.call(lambda: e.verbs.verify_commit(job_id, settings.checks))
