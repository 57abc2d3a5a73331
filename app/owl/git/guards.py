"""What `owl jobs drop` and `accept` check before removing anything, and how they remove it.

Two rules. Nothing committed is deleted silently: a branch whose commits are
found nowhere else is dropped only with `--force`, and even then its tip is
printed with the command that brings it back and kept under
`refs/owl/dropped/` for 30 days. And a guard that cannot check refuses: when
git cannot say whether a worktree is clean (its `.git` is gone, its project
moved), the answer is a one-line refusal saying what cannot be done and
why, never "clean".

Each function returns the words for the person; the verbs raise or print them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from owl.git import jobstore, storing, workspace
from owl.git.workspace import WorkspaceError

KEPT_DAYS = int(workspace.KEEP_DROPPED // 86400)


def _paths(job: dict[str, Any]) -> tuple[Path, Path | None]:
    return Path(job["project"]), Path(job["worktree"]) if job.get("worktree") else None


def bring_in(job: dict[str, Any], verb: str) -> str | None:
    """Bring the Job's branch from its own store into the project
    (`owl.git.storing.land`) before anything reads or removes it; why it could
    not be, or None."""
    project, worktree = _paths(job)
    branch = job.get("branch")
    if worktree is None or not branch or workspace.project_problem(project):
        return None
    try:
        storing.land(project, jobstore.places(project, worktree), branch)
    except jobstore.StoreError as e:
        return (
            f"cannot {verb} job {job['id']}: {e}; its commits are safe in "
            f"{jobstore.store_path(worktree)}"
        )
    return None


def drop_refusal(job: dict[str, Any], force: bool) -> str | None:
    """Why dropping would lose work the person has not agreed to lose, or None."""
    if force:
        return None
    jid = job["id"]
    project, worktree = _paths(job)
    if worktree is not None:
        try:
            if workspace.is_dirty(worktree):
                return (
                    f"job {jid}'s worktree {worktree} has uncommitted changes "
                    "(use --force to discard them)"
                )
        except (WorkspaceError, OSError) as e:
            return (
                f"cannot drop job {jid}: nothing can tell whether {worktree} holds "
                f"uncommitted work ({e}); use --force to drop it anyway"
            )
    if job.get("branch"):
        try:
            tip = workspace.branch_tip(project, job["branch"])
            n = workspace.own_commits(project, job["branch"], job.get("base")) if tip else 0
        except (WorkspaceError, OSError) as e:
            return (
                f"cannot drop job {jid}: nothing can tell whether branch {job['branch']} "
                f"has commits of its own ({e}); use --force to drop it anyway"
            )
        if n:
            return (
                f"job {jid}'s branch {job['branch']} has {n} commit{'s' if n != 1 else ''} "
                f"found on no other branch (use --force to drop it; its tip is kept under "
                f"{workspace.DROPPED} for {KEPT_DAYS} days)"
            )
    return None


def drop_workspace(job: dict[str, Any]) -> str:
    """Remove the worktree and branch of a dropped Job; the words that follow "job N dropped".

    In an order a crash can be cut into at any point and the whole done again
    (`owl.verbs.recovery`): the branch's tip is kept under refs/owl/dropped/
    first, then the worktree goes, then the branch, and only while it still
    points at the tip that was kept. A branch whose tip cannot be read and
    kept is left, and so is its worktree."""
    project, worktree = _paths(job)
    gone = workspace.project_problem(project)
    if gone:
        return f"; its worktree and branch were left as they are: {gone}"
    branch = job.get("branch")
    tip = kept = None
    landed = bring_in(job, "drop")
    if landed:
        return f"; its worktree and branch {branch} stay: {landed}"
    if branch:
        try:
            workspace.prune_dropped(project)
            tip = workspace.branch_tip(project, branch)
            if tip is not None and workspace.own_commits(project, branch, job.get("base")):
                kept = workspace.keep_dropped(project, branch, tip)
        except (WorkspaceError, OSError) as e:
            return f"; its worktree and branch {branch} stay: {e}"
    said = ""
    try:
        workspace.remove(project, worktree, force=True)
    except (WorkspaceError, OSError) as e:
        said = f"; its worktree {worktree} stays: {e}"
    if not branch:
        return said
    if tip is None:  # gone already: by a drop a crash cut short, perhaps
        earlier = workspace.kept(project, branch)
        return said + (f"; branch {branch} deleted; {earlier[0][0]} keeps it" if earlier else "")
    try:
        workspace.git(project, "update-ref", "-d", f"refs/heads/{branch}", tip)
    except (WorkspaceError, OSError) as e:
        return said + f"; branch {branch} stays: {e}"
    if kept is None:
        return said + f"; branch {branch} deleted (it had no commits of its own)"
    short = (
        workspace.git(project, "rev-parse", "--short=7", tip, check=False).stdout.strip() or tip[:7]
    )
    return (
        said + f"; branch {branch} deleted at {short}; git branch {branch} {short} brings "
        f"it back (kept as {kept} for {KEPT_DAYS} days)"
    )


def accept_refusal(job: dict[str, Any]) -> str | None:
    """Why the Job's worktree cannot be removed safely on accept, or None."""
    jid = job["id"]
    project, worktree = _paths(job)
    gone = workspace.project_problem(project)
    if gone:
        return (
            f"cannot accept job {jid}: {gone}; its branch {job.get('branch')} lives there, "
            f"so move the project back, or drop the job with --force"
        )
    if worktree is None:
        return None
    broken = workspace.reach_problem(project, worktree)
    if broken is None:
        try:
            if workspace.is_dirty(worktree):
                return (
                    f"job {jid}'s worktree {worktree} has uncommitted changes: commit "
                    "them there, or drop them, first"
                )
            return None
        except (WorkspaceError, OSError) as e:
            broken = str(e)
    return (
        f"cannot accept job {jid}: nothing can tell whether its worktree holds uncommitted "
        f"work ({broken}); keep what you need from {worktree}, delete that folder, and "
        f"accept again (the branch {job.get('branch')} is kept)"
    )


def broken_reason(job_id: int, branch: str | None, problem: str) -> str:
    """A blocked Job's reason for a workspace that cannot be worked in, with what to do."""
    if problem.startswith("the project "):
        return (
            f"{problem}: move it back and run owl jobs extend {job_id}, or drop the job "
            f"(owl jobs drop {job_id} --force)"
        )
    on = f" (the commits are safe on branch {branch})" if branch else ""
    return (
        f"{problem}{on}: delete the worktree folder and run owl jobs extend {job_id} to "
        f"start again from the branch, or owl jobs drop {job_id} --force"
    )
