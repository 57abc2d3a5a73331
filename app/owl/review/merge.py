"""`owl jobs accept --merge`: bring a Job's branch into its base branch, safely.

The rules, in order (a pure `plan` over what git says, then `carry_out`):

- already merged: nothing to do;
- a fast-forward when the base is an ancestor of the branch: where the base
  is checked out (the project's checkout or another worktree) and that tree
  is clean, `git merge --ff-only` there; where it is not checked out,
  `git update-ref` with the old value as a guard, so a base that moved
  meanwhile is never overwritten;
- otherwise a merge commit, only when the project's own checkout is on the
  base branch and clean; a conflict is aborted and reported;
- otherwise a one-line refusal that says why and gives the git command to run.

A working tree with uncommitted changes to tracked files is never touched,
and nothing is ever forced. Every git call goes through `owl.workspace.git`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from owl import workspace
from owl.errors import Refused


@dataclass(frozen=True)
class Situation:
    """What git says about a branch and its base, as `plan` needs it."""

    project: Path                 # the project's own checkout
    base: str                     # the base branch's name
    branch: str
    merged: bool                  # the branch is already in the base
    can_ff: bool                  # the base is an ancestor of the branch
    base_tree: Path | None        # the worktree where the base is checked out, if any
    base_tree_clean: bool
    project_head: str | None      # the branch the project's checkout is on (None: detached)


@dataclass(frozen=True)
class Plan:
    kind: str                     # nothing, update-ref, ff, merge, refuse
    cwd: Path
    message: str = ""


def _cmd(cwd: Path, *args: str) -> str:
    return "git -C " + shlex.join([str(cwd), *args])


def plan(s: Situation) -> Plan:
    """What to do for this situation: pure, so every case is tested on data."""
    if s.merged:
        return Plan("nothing", s.project, f"{s.branch} is already in {s.base}")
    if s.can_ff:
        if s.base_tree is None:
            return Plan("update-ref", s.project)
        if s.base_tree_clean:
            return Plan("ff", s.base_tree)
        return Plan("refuse", s.base_tree,
                    f"{s.base_tree} (on {s.base}) has uncommitted changes; commit or stash them, "
                    f"then run: {_cmd(s.base_tree, 'merge', '--ff-only', s.branch)}")
    if s.base_tree is not None and s.base_tree.resolve() == s.project.resolve():
        if s.base_tree_clean:
            return Plan("merge", s.project)
        return Plan("refuse", s.project,
                    f"{s.base} has moved on, so this needs a merge commit, and {s.project} has "
                    f"uncommitted changes; commit or stash them, then run: "
                    f"{_cmd(s.project, 'merge', s.branch)}")
    if s.base_tree is not None:
        return Plan("refuse", s.base_tree,
                    f"{s.base} has moved on, so this needs a merge commit, and it is checked out "
                    f"in {s.base_tree}, not in the project's checkout; run: "
                    f"{_cmd(s.base_tree, 'merge', s.branch)}")
    on = f"on {s.project_head}" if s.project_head else "on a detached HEAD"
    return Plan("refuse", s.project,
                f"{s.base} has moved on, so this needs a merge commit, and {s.project} is {on}, "
                f"not {s.base}; run: {_cmd(s.project, 'switch', s.base)} && "
                f"{_cmd(s.project, 'merge', s.branch)}")


# ------------------------------------------------------------------- git

def _ok(repo: Path, *args: str) -> bool:
    return workspace.git(repo, *args, check=False).returncode == 0


def _rev(repo: Path, ref: str) -> str | None:
    proc = workspace.git(repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def current_branch(repo: Path) -> str | None:
    """The branch checked out in `repo`, or None on a detached HEAD."""
    proc = workspace.git(repo, "symbolic-ref", "-q", "--short", "HEAD", check=False)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def base_branch_of(project: Path, job: dict) -> str | None:
    """The branch a Job was made from: as recorded, else the project's current branch
    when the Job's starting commit is on it."""
    if job.get("base_branch"):
        return str(job["base_branch"])
    head = current_branch(project)
    if head and job.get("base") and _ok(project, "merge-base", "--is-ancestor", job["base"], head):
        return head
    return None


def checked_out_at(project: Path, branch: str) -> Path | None:
    """The worktree of `project` (its own checkout included) where `branch` is checked out."""
    out = workspace.git(project, "worktree", "list", "--porcelain", check=False).stdout
    path: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree "):])
        elif line == f"branch refs/heads/{branch}" and path is not None:
            return path
    return None


def is_clean(tree: Path) -> bool:
    """No uncommitted change to a tracked file, and no merge or rebase under way."""
    proc = workspace.git(tree, "status", "--porcelain", "--untracked-files=no", check=False)
    return proc.returncode == 0 and not proc.stdout.strip()


def situation(project: Path, base: str, branch: str) -> Situation:
    if _rev(project, f"refs/heads/{base}") is None:
        raise Refused(f"the base branch {base} is not in {project} any more")
    if _rev(project, f"refs/heads/{branch}") is None:
        raise Refused(f"the branch {branch} is not in {project} any more")
    tree = checked_out_at(project, base)
    return Situation(
        project=project, base=base, branch=branch,
        merged=_ok(project, "merge-base", "--is-ancestor", f"refs/heads/{branch}", f"refs/heads/{base}"),
        can_ff=_ok(project, "merge-base", "--is-ancestor", f"refs/heads/{base}", f"refs/heads/{branch}"),
        base_tree=tree, base_tree_clean=is_clean(tree) if tree is not None else True,
        project_head=current_branch(project))


def carry_out(p: Plan, s: Situation, title: str) -> str:
    """Do what `plan` said; returns one line saying what happened (Refused if it could not)."""
    if p.kind == "nothing":
        return p.message
    if p.kind == "refuse":
        raise Refused(p.message)
    if p.kind == "update-ref":
        old, new = _rev(s.project, f"refs/heads/{s.base}"), _rev(s.project, f"refs/heads/{s.branch}")
        proc = workspace.git(s.project, "update-ref", "-m", f"owl: fast-forward to {s.branch}",
                             f"refs/heads/{s.base}", str(new), str(old), check=False)
        if proc.returncode != 0:
            raise Refused(f"{s.base} moved while merging; run: "
                          f"{_cmd(s.project, 'merge', '--ff-only', s.branch)} where it is checked out")
        return f"{s.base} fast-forwarded to {s.branch} ({str(new)[:10]})"
    if p.kind == "ff":
        proc = workspace.git(p.cwd, "merge", "--ff-only", "--no-edit", s.branch, check=False)
        if proc.returncode != 0:
            raise Refused(f"git merge --ff-only failed in {p.cwd}: {_last_line(proc)}")
        return f"{s.base} fast-forwarded to {s.branch} in {p.cwd}"
    proc = workspace.git(p.cwd, "merge", "--no-ff", "--no-edit", "-m",
                         f"Merge {s.branch}: {title}", s.branch, check=False)
    if proc.returncode != 0:
        conflicts = workspace.git(p.cwd, "diff", "--name-only", "--diff-filter=U",
                                  check=False).stdout.split()
        if _rev(p.cwd, "MERGE_HEAD") is not None:      # git stopped half way: undo it
            workspace.git(p.cwd, "merge", "--abort", check=False)
        if not conflicts:
            raise Refused(f"git merge failed in {p.cwd} ({_last_line(proc)}); nothing was "
                          f"changed; run: {_cmd(p.cwd, 'merge', s.branch)}")
        what = ", ".join(conflicts[:5]) + (" …" if len(conflicts) > 5 else "")
        raise Refused(f"{s.branch} does not merge cleanly into {s.base} (conflicts in {what}); "
                      f"nothing was changed; run: {_cmd(p.cwd, 'merge', s.branch)} and resolve them")
    return f"{s.branch} merged into {s.base} with a merge commit in {p.cwd}"


def _last_line(proc: object) -> str:
    text = (getattr(proc, "stderr", "") or getattr(proc, "stdout", "") or "").strip().splitlines()
    return text[-1] if text else "no reason given"


def merge(project: Path, job: dict) -> tuple[str, str]:
    """Bring a Job's branch into its base branch: (base branch, what happened)."""
    base = base_branch_of(project, job)
    if base is None:
        raise Refused(f"cannot tell which branch job {job['id']} started from; run git merge "
                      f"{job['branch']} yourself on that branch")
    s = situation(project, base, job["branch"])
    return base, carry_out(plan(s), s, job.get("title") or f"job {job['id']}")


def require_merged(project: Path, job: dict) -> None:
    """Refused unless the Job's branch is already in its base branch."""
    base = base_branch_of(project, job)
    branch = job["branch"]
    if base is None or not _ok(project, "merge-base", "--is-ancestor", f"refs/heads/{branch}",
                               f"refs/heads/{base}"):
        raise Refused(f"{branch} is not merged into {base or 'its base branch'}: it holds the "
                      "Job's only copy of its work (add --merge, or delete it yourself)")


def delete_merged_branch(project: Path, job: dict) -> None:
    """Delete a Job's branch, but only once it is in its base branch (never its only copy)."""
    require_merged(project, job)
    branch = job["branch"]
    old = _rev(project, f"refs/heads/{branch}")
    workspace.git(project, "update-ref", "-d", f"refs/heads/{branch}", str(old))
