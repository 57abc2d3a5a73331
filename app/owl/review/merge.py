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

Every git command a refusal suggests runs nothing of the repository's: an
agent may have planted hooks, an fsmonitor, filters or merge drivers in the
config the person's checkout shares, and a plain `git merge` would run them
as the person. So the command carries `-c` settings that turn hooks and the
fsmonitor off and blank every driver the project's config defines (named in
the message); where a driver's name cannot be written in a `-c` (it holds
`=`), or there are many, the message says to look at them first, with a
`git config` that only reads.

A working tree with uncommitted changes to tracked files is never touched,
and nothing is ever forced. Every git call goes through `owl.git.workspace.git`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from owl.git import workspace
from owl.errors import Refused
from owl.review import signing


@dataclass(frozen=True)
class Situation:
    """What git says about a branch and its base, as `plan` needs it."""

    project: Path  # the project's own checkout
    base: str  # the base branch's name
    branch: str
    merged: bool  # the branch is already in the base
    can_ff: bool  # the base is an ancestor of the branch
    base_tree: Path | None  # the worktree where the base is checked out, if any
    base_tree_clean: bool
    project_head: str | None  # the branch the project's checkout is on (None: detached)
    drivers: tuple[str, ...] = ()  # the command-line drivers the project's config sets


@dataclass(frozen=True)
class Plan:
    kind: str  # nothing, update-ref, ff, merge, refuse
    cwd: Path
    message: str = ""


_SAFE = ("core.hooksPath=/dev/null", "core.fsmonitor=false")
_NAMED_MAX = 4  # more drivers than this: look first, rather than a command that long


def _cmd(cwd: Path, *args: str, drivers: tuple[str, ...] = ()) -> str:
    """A git command for the person that runs no hook, fsmonitor or driver of the repository's."""
    settings = [*_SAFE, *(f"{d}=" for d in drivers)]
    return "git -C " + shlex.join([str(cwd), *(a for c in settings for a in ("-c", c)), *args])


def look_first(cwd: Path, drivers: tuple[str, ...]) -> str | None:
    """What to say instead of a command, when the drivers cannot all be blanked in one."""
    if len(drivers) <= _NAMED_MAX and not any("=" in d for d in drivers):
        return None
    shown = ", ".join(d[:60] for d in drivers[:_NAMED_MAX]) + (
        " …" if len(drivers) > _NAMED_MAX else ""
    )
    return (
        f"the project's config sets {len(drivers)} driver command(s) ({shown}) that a "
        f"merge could run; look at them first: git -C {shlex.quote(str(cwd))} config "
        f"--show-origin --get-regexp '^(filter|merge)[.]'"
    )


def _then_run(cwd: Path, s: Situation, *args: str) -> str:
    """ "run: <command>", or the words to look first."""
    return look_first(cwd, s.drivers) or f"run: {_cmd(cwd, *args, drivers=s.drivers)}"


def plan(s: Situation) -> Plan:
    """What to do for this situation: pure, so every case is tested on data."""
    if s.merged:
        return Plan("nothing", s.project, f"{s.branch} is already in {s.base}")
    if s.can_ff:
        if s.base_tree is None:
            return Plan("update-ref", s.project)
        if s.base_tree_clean:
            return Plan("ff", s.base_tree)
        return Plan(
            "refuse",
            s.base_tree,
            f"{s.base_tree} (on {s.base}) has uncommitted changes; commit or stash them, "
            f"then {_then_run(s.base_tree, s, 'merge', '--ff-only', s.branch)}",
        )
    if s.base_tree is not None and s.base_tree.resolve() == s.project.resolve():
        if s.base_tree_clean:
            return Plan("merge", s.project)
        return Plan(
            "refuse",
            s.project,
            f"{s.base} has moved on, so this needs a merge commit, and {s.project} has "
            f"uncommitted changes; commit or stash them, then "
            f"{_then_run(s.project, s, 'merge', '--no-ff', s.branch)}",
        )
    if s.base_tree is not None:
        return Plan(
            "refuse",
            s.base_tree,
            f"{s.base} has moved on, so this needs a merge commit, and it is checked out "
            f"in {s.base_tree}, not in the project's checkout; "
            f"{_then_run(s.base_tree, s, 'merge', '--no-ff', s.branch)}",
        )
    on = f"on {s.project_head}" if s.project_head else "on a detached HEAD"
    return Plan(
        "refuse",
        s.project,
        f"{s.base} has moved on, so this needs a merge commit, and {s.project} is {on}, "
        f"not {s.base}; "
        + (
            look_first(s.project, s.drivers)
            or (
                f"run: {_cmd(s.project, 'switch', s.base, drivers=s.drivers)} && "
                f"{_cmd(s.project, 'merge', '--no-ff', s.branch, drivers=s.drivers)}"
            )
        ),
    )


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
            path = Path(line[len("worktree ") :])
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
        project=project,
        base=base,
        branch=branch,
        merged=_ok(
            project, "merge-base", "--is-ancestor", f"refs/heads/{branch}", f"refs/heads/{base}"
        ),
        can_ff=_ok(
            project, "merge-base", "--is-ancestor", f"refs/heads/{base}", f"refs/heads/{branch}"
        ),
        base_tree=tree,
        base_tree_clean=is_clean(tree) if tree is not None else True,
        project_head=current_branch(project),
        drivers=tuple(workspace.drivers(project)),
    )


def carry_out(p: Plan, s: Situation, title: str, signer: signing.Signer | None = None) -> str:
    """Do what `plan` said; returns one line saying what happened (Refused if it
    could not). With `signer`, a merge commit is signed (`owl.review.signing`)."""
    if p.kind == "nothing":
        return p.message
    if p.kind == "refuse":
        raise Refused(p.message)
    if p.kind == "update-ref":
        old, new = (
            _rev(s.project, f"refs/heads/{s.base}"),
            _rev(s.project, f"refs/heads/{s.branch}"),
        )
        proc = workspace.git(
            s.project,
            "update-ref",
            "-m",
            f"owl: fast-forward to {s.branch}",
            f"refs/heads/{s.base}",
            str(new),
            str(old),
            check=False,
        )
        if proc.returncode != 0:
            raise Refused(
                f"{s.base} moved while merging; where it is checked out, "
                f"{_then_run(s.project, s, 'merge', '--ff-only', s.branch)}"
            )
        return f"{s.base} fast-forwarded to {s.branch} ({str(new)[:10]})"
    if p.kind == "ff":
        proc = workspace.git(p.cwd, "merge", "--ff-only", "--no-edit", s.branch, check=False)
        if proc.returncode != 0:
            raise Refused(
                f"git merge --ff-only failed in {p.cwd} "
                f"({_git_reason(proc.stdout + proc.stderr)}); nothing was changed"
            )
        return f"{s.base} fast-forwarded to {s.branch} in {p.cwd}"
    proc = workspace.git(
        p.cwd,
        "merge",
        "--no-ff",
        "--no-edit",
        *(["-S"] if signer is not None else []),
        "-m",
        f"Merge {s.branch}: {title}",
        s.branch,
        check=False,
        timeout=signing.SIGN_TIMEOUT if signer is not None else workspace.GIT_TIMEOUT,
        config=signer.config() if signer is not None else (),
    )
    if proc.returncode != 0:
        conflicts = workspace.git(
            p.cwd, "diff", "--name-only", "-z", "--diff-filter=U", check=False
        ).stdout.split("\0")
        conflicts = [c for c in conflicts if c]
        if _rev(p.cwd, "MERGE_HEAD") is not None:  # git stopped half way: undo it
            workspace.git(p.cwd, "merge", "--abort", check=False)
        said = proc.stdout + proc.stderr
        if signer is not None and not conflicts and _unsigned(said):
            raise Refused(signing.merge_failure(s.branch, s.base, signer, said))
        # A driver Owl blanked stops git before any conflict is written: look
        # at the files both sides changed for the drivers they would need.
        touched = conflicts or _both_changed(p.cwd, s.base, s.branch)
        raise Refused(
            refusal(p.cwd, s, proc.stdout + proc.stderr, conflicts, _merge_drivers(p.cwd, touched))
        )
    signed = " (signed)" if signer is not None else ""
    return f"{s.branch} merged into {s.base} with a merge commit{signed} in {p.cwd}"


def _names(paths: list[str], most: int = 5) -> str:
    return ", ".join(paths[:most]) + (f" and {len(paths) - most} more" if len(paths) > most else "")


def refusal(
    cwd: Path, s: Situation, said: str, conflicts: list[str], drivers: dict[str, list[str]]
) -> str:
    """Why a merge commit was refused, in one line: the conflicting files and the
    merge drivers the project sets for them, or what git said; then what to do.

    Pure: `said` is git's output, `drivers` maps a driver's name to its files."""
    if conflicts:
        why = f"{s.branch} does not merge cleanly into {s.base} (conflicts in {_names(conflicts)})"
    elif drivers:
        why = f"{s.branch} cannot be merged into {s.base} by Owl"
    else:
        why = f"git would not merge {s.branch} into {s.base} in {cwd} ({_git_reason(said)})"
    for name, files in sorted(drivers.items()):
        why += (
            f"; the project sets merge driver {name!r} (merge.{name}.driver) for "
            f"{_names(files, 3)}, which Owl does not run"
        )
    if drivers:  # git cannot merge those files without the driver: the person decides
        some = sorted(f for files in drivers.values() for f in files)[:3]
        then = (
            f"look at it first: git -C {shlex.quote(str(cwd))} config --show-origin "
            f"--get-regexp '^merge[.]' and git -C {shlex.quote(str(cwd))} check-attr "
            f"merge -- {shlex.join(some)}"
        )
        return f"{why}; nothing was changed; {then}"
    then = look_first(cwd, s.drivers) or (
        f"to merge by hand with nothing of the repository's run, "
        f"run: {_cmd(cwd, 'merge', '--no-ff', s.branch, drivers=s.drivers)}"
        + (" and resolve them" if conflicts else "")
    )
    return f"{why}; nothing was changed; {then}"


def _git_reason(said: str) -> str:
    """git's own reason for a merge that did not start: its error line and the files named."""
    lines = [ln for ln in said.splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.startswith(("error:", "fatal:"))), None)
    if first is None:
        return lines[-1][:200] if lines else "no reason given"
    files = [ln.strip() for ln in lines if ln.startswith("\t")]
    text = first.split(":", 1)[1].strip()
    return (text.rstrip(":") + (f": {_names(files)}" if files else ""))[:300]


def _both_changed(cwd: Path, base: str, branch: str) -> list[str]:
    """The files changed both on `base` and on `branch` since they parted."""
    fork = workspace.git(cwd, "merge-base", base, branch, check=False).stdout.strip()
    if not fork:
        return []
    sides = [
        set(
            workspace.git(
                cwd, "diff", "--name-only", "-z", "--no-renames", fork, side, check=False
            ).stdout.split("\0")
        )
        - {""}
        for side in (base, branch)
    ]
    return sorted(sides[0] & sides[1])


def _merge_drivers(cwd: Path, paths: list[str]) -> dict[str, list[str]]:
    """The merge drivers the attributes name for `paths` (check-attr runs nothing)."""
    if not paths:
        return {}
    out = workspace.git(
        cwd, "check-attr", "-z", "merge", "--", *paths[:200], check=False
    ).stdout.split("\0")
    found: dict[str, list[str]] = {}
    for i in range(0, len(out) - 2, 3):
        path, value = out[i], out[i + 2]
        if value not in ("unspecified", "unset", "set", "text", "binary", "union", ""):
            found.setdefault(value, []).append(path)
    return found


def _unsigned(said: str) -> bool:
    """Whether git stopped at signing the merge commit (the merge itself went through)."""
    return any(w in said for w in ("failed to sign", "failed to write commit object", "cannot run"))


def merge(project: Path, job: dict, signer: signing.Signer | None = None) -> tuple[str, str]:
    """Bring a Job's branch into its base branch: (base branch, what happened);
    with `signer`, a merge commit made is signed."""
    s, p = prepare(project, job)
    return s.base, carry_out(p, s, job.get("title") or f"job {job['id']}", signer)


def prepare(project: Path, job: dict) -> tuple[Situation, Plan]:
    """What merging a Job's branch would do, looked at before anything changes:
    Refused at once when the plan is to refuse (so accept signs nothing first)."""
    base = base_branch_of(project, job)
    if base is None:
        raise Refused(
            f"cannot tell which branch job {job['id']} started from; run git merge "
            f"{job['branch']} yourself on that branch"
        )
    s = situation(project, base, job["branch"])
    p = plan(s)
    if p.kind == "refuse":
        raise Refused(p.message)
    return s, p


def require_merged(project: Path, job: dict) -> None:
    """Refused unless the Job's branch is already in its base branch."""
    base = base_branch_of(project, job)
    branch = job["branch"]
    if base is None or not _ok(
        project, "merge-base", "--is-ancestor", f"refs/heads/{branch}", f"refs/heads/{base}"
    ):
        raise Refused(
            f"{branch} is not merged into {base or 'its base branch'}: it holds the "
            "Job's only copy of its work (add --merge, or delete it yourself)"
        )


def delete_merged_branch(project: Path, job: dict) -> None:
    """Delete a Job's branch, but only once it is in its base branch (never its only copy)."""
    require_merged(project, job)
    branch = job["branch"]
    old = _rev(project, f"refs/heads/{branch}")
    workspace.git(project, "update-ref", "-d", f"refs/heads/{branch}", str(old))
