"""A git worktree and branch of its own for every Job.

The worktree lives under Owl's data folder at `worktrees/job-<id>` and the
branch is `<branch_prefix>job-<id>`: both are made from the Job's number only,
so nothing a person or an agent types can steer them elsewhere. The worktree
is kept across Runs, so every Run of a Job continues where the last one
stopped; it is removed only when the person accepts or drops the Job.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from owl.git import disarm, safegit
from owl.git.gitdir import common_dir, store_path
from owl.errors import Refused

# How long one git call may take before its process tree is ended
# (OWL_GIT_TIMEOUT, in seconds, sets it: for slow disks, and for tests).
GIT_TIMEOUT = float(os.environ.get("OWL_GIT_TIMEOUT") or 60)


# A blob larger than this is never read whole by Owl's git to count or diff its
# lines: git takes it as binary (`core.bigFileThreshold`, default 512 MB). Git
# spends about eleven times a text file's size to diff it (a 77 MB file of short
# lines took 870 MB), so this bounds what reading any one file costs.
BIG_BLOB = 4 << 20
BOUNDED: tuple[tuple[str, str], ...] = (("core.bigFileThreshold", str(BIG_BLOB)),)


class WorkspaceError(Exception):
    """git could not set up or remove a Job's workspace; str() says why."""


@dataclass(frozen=True)
class Workspace:
    branch: str
    worktree: Path
    base: str


def git(
    cwd: Path | str,
    *args: str,
    check: bool = True,
    timeout: float = GIT_TIMEOUT,
    config: tuple[tuple[str, str], ...] = (),
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    """git ARGS in `cwd`, the one way Owl runs git: nothing the repository
    configures (hooks, fsmonitor, filters, drivers) runs, and git's process
    tree is ended when it exits or times out (see `owl.git.safegit`).

    Raises WorkspaceError if git times out, or fails and `check` is set;
    OSError if git cannot be started."""
    try:
        proc = safegit.run(cwd, *args, timeout=timeout, config=config, env=env, stdin=stdin)
    except safegit.GitTimeout as e:
        raise WorkspaceError(str(e)) from None
    if check and proc.returncode != 0:
        msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise WorkspaceError(f"git {args[0]} failed: {msg[-1] if msg else proc.returncode}")
    return proc


@contextlib.contextmanager
def git_stream(
    cwd: Path | str,
    *args: str,
    timeout: float = GIT_TIMEOUT,
    config: tuple[tuple[str, str], ...] = (),
    stdin: bytes | IO[bytes] | None = None,
) -> Iterator[safegit.Stream]:
    """`git`, its output read from a pipe as it comes (`safegit.stream`): for
    output too large to hold. Raises WorkspaceError if git times out."""
    try:
        with safegit.stream(cwd, *args, timeout=timeout, config=config, stdin=stdin) as s:
            yield s
    except safegit.GitTimeout as e:
        raise WorkspaceError(str(e)) from None


def drivers(cwd: Path | str) -> list[str]:
    """The driver commands (`filter.x.smudge`, `merge.y.driver`, …) the config
    git reads in `cwd` sets: what a git the person runs there could run."""
    try:
        return disarm.drivers(safegit.configured(cwd, GIT_TIMEOUT))
    except safegit.GitTimeout as e:
        raise WorkspaceError(str(e)) from None


def project_root(path: str | Path) -> Path:
    """The top of the git repository at `path`, or Refused saying what is wrong."""
    return project_head(path)[0]


def project_head(path: str | Path) -> tuple[Path, str]:
    """The top of the git repository at `path` and the commit its HEAD names,
    or Refused saying what is wrong."""
    p = Path(path).expanduser()
    if not p.exists():
        raise Refused(f"project {p} does not exist")
    if not p.is_dir():
        raise Refused(f"project {p} is not a folder")
    try:
        # One git for both questions (`owl add` waits on it): the top, printed
        # first, and whether HEAD is a commit (exit 1 with only the top printed).
        proc = git(
            p, "rev-parse", "--show-toplevel", "--verify", "-q", "HEAD^{commit}", check=False
        )
    except (OSError, WorkspaceError) as e:
        raise Refused(f"project {p}: git cannot be run ({e})") from None
    lines = proc.stdout.splitlines()
    if proc.returncode not in (0, 1) or not lines:
        raise Refused(f"project {p} is not a git repository")
    root = Path(lines[0].strip()).resolve()
    if proc.returncode != 0 or len(lines) < 2:
        raise Refused(f"project {root} has no commits yet: make one first")
    return root, lines[1].strip()


def fresh_names(project: Path, job_id: int, prefix: str, worktrees: Path) -> tuple[str, Path]:
    """A branch and worktree path for a new Job, never an existing one.

    `job-<id>` normally; if that branch or folder is already there (a database
    that was reset, two Owl homes on one project), `job-<id>-2` and so on, so a
    new Job never inherits someone else's commits."""
    n = 1
    while True:
        suffix = f"job-{int(job_id)}" + (f"-{n}" if n > 1 else "")
        branch, path = f"{prefix}{suffix}", Path(worktrees) / suffix
        taken = (
            git(
                project, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False
            ).returncode
            == 0
        )
        if not taken and not path.exists() and not os.path.lexists(store_path(path)):
            return branch, path
        n += 1


_tree_locks: dict[str, threading.RLock] = {}
_tree_locks_guard = threading.Lock()


@contextlib.contextmanager
def changing_worktrees(project: Path) -> Iterator[None]:
    """One change at a time to a project's list of worktrees, in this process.

    Why: `git worktree prune` deletes an admin folder that has no `gitdir`
    file yet, and a `git worktree add` still under way has just such a
    folder. Two Jobs of one project set up at once (or one set up while
    another's worktree is removed) would break each other's add with "could
    not open .git/worktrees/job-N/gitdir". Every add, remove and prune Owl
    runs holds this lock; they all run off the engine thread."""
    key = str(Path(project).absolute())
    with _tree_locks_guard:
        lock = _tree_locks.setdefault(key, threading.RLock())
    with lock:
        yield


def is_dirty(worktree: Path) -> bool:
    """Whether the worktree holds uncommitted changes; False only if it is gone.

    Raises WorkspaceError when that cannot be known (no .git, its repository
    moved, git failing): a guard that cannot check must not assume clean."""
    wt = Path(worktree)
    if not wt.exists():
        return False
    top = git(wt, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != wt.resolve():
        raise WorkspaceError(
            f"{wt} is not a git worktree any more (its .git is missing or points nowhere)"
        )
    return bool(git(wt, "status", "--porcelain").stdout.strip())


def remove(project: Path, worktree: Path | None, *, force: bool = False) -> None:
    """Remove the worktree and its store (never the branch: whoever removes a
    Job's worktree brings the store's branch in first, `owl.git.storing.land`);
    refuse uncommitted changes unless forced."""
    with changing_worktrees(project):
        _remove(project, worktree, force)


def _remove(project: Path, worktree: Path | None, force: bool) -> None:
    if worktree is None or not Path(worktree).exists():
        if worktree is not None:
            _remove_store(Path(worktree))
        git(project, "worktree", "prune", check=False)
        return
    if store_path(Path(worktree).resolve()).is_dir():
        _remove_with_store(Path(worktree), force)
        return
    if not force and is_dirty(Path(worktree)):
        raise Refused(f"{worktree} has uncommitted changes (use --force to discard them)")
    if not force and _submodules_in(Path(worktree)):
        # Owl's look for changes never goes inside a submodule (its own config)
        raise Refused(
            f"{worktree} holds submodules ({', '.join(_submodules_in(Path(worktree)))}), "
            "which Owl does not look inside; remove it yourself, or use --force"
        )
    # Always --force to git: Owl's own is_dirty looked (above, run in the
    # worktree); without it git runs a `git status` of its own there, under
    # config that Owl's listing in the project did not see.
    args = ["worktree", "remove", str(worktree), "--force"] + (["--force"] if force else [])
    try:
        git(project, *args)
    except WorkspaceError:
        if not (force and reach_problem(project, Path(worktree))):
            raise
        # git no longer knows it as a worktree: the person said discard it
        shutil.rmtree(worktree)
        git(project, "worktree", "prune", check=False)


def _remove_with_store(worktree: Path, force: bool) -> None:
    """A worktree of the Job's own store: looked at as `_remove` does, then the
    worktree and its store deleted (a link inside is removed, never followed).
    git removes the worktree from the store (`--force`: Owl looked already), or,
    should it refuse, the folder goes as it is."""
    if not force and is_dirty(worktree):
        raise Refused(f"{worktree} has uncommitted changes (use --force to discard them)")
    if not force and _submodules_in(worktree):
        raise Refused(
            f"{worktree} holds submodules ({', '.join(_submodules_in(worktree))}), "
            "which Owl does not look inside; remove it yourself, or use --force"
        )
    store = store_path(worktree.resolve())
    try:
        git(store, "worktree", "remove", "--force", "--force", str(worktree))
    except WorkspaceError:
        pass
    if worktree.exists():
        shutil.rmtree(worktree)
    _remove_store(worktree)


def _remove_store(worktree: Path) -> None:
    store = store_path(worktree.resolve())
    if store.is_symlink():
        store.unlink()
    elif store.is_dir():
        shutil.rmtree(store)


def _submodules_in(worktree: Path) -> list[str]:
    """The submodules checked out in `worktree` (a `.git` in the folder `.gitmodules` names)."""
    if not (worktree / ".gitmodules").is_file():
        return []
    out = git(
        worktree,
        "config",
        "-f",
        ".gitmodules",
        "--get-regexp",
        r"^submodule\..*\.path$",
        check=False,
    ).stdout
    paths = [line.split(" ", 1)[1] for line in out.splitlines() if " " in line]
    return [p for p in paths if (worktree / p / ".git").exists()]


def delete_branch(project: Path, branch: str) -> None:
    git(project, "branch", "-D", branch)


def commits_since(repo: Path, base: str, branch: str, limit: int = 50) -> list[str]:
    out = git(repo, "log", "--oneline", f"-{limit}", f"{base}..{branch}", check=False).stdout
    # Split on newlines only: a subject may carry a `\r` and stays one commit.
    return [line for line in out.split("\n") if line.strip()]


def diff_stat(repo: Path, base: str, branch: str) -> str:
    return git(
        repo, "diff", "--shortstat", f"{base}...{branch}", check=False, config=BOUNDED
    ).stdout.strip()


def _hash_like(ref: str) -> bool:
    """Whether `ref` may be a commit's hash (or its start), not a name."""
    return 4 <= len(ref) <= 64 and all(c in "0123456789abcdefABCDEF" for c in ref)


def read_base_file(project: Path, name: str, ref: str = "HEAD") -> str | None:
    """A file as committed on the project's base branch, never from a worktree.

    None only when git says the commit has no such file; any other failure
    raises WorkspaceError (the checks must not vanish because git failed)."""
    proc = git(project, "show", f"{ref}:{name}", check=False)
    if proc.returncode == 0:
        return proc.stdout
    absent = "does not exist in" in proc.stderr or "exists on disk, but not in" in proc.stderr
    # git says "does not exist" for a commit it does not have, too, when named by
    # its hash; a name (HEAD, a branch) it cannot resolve is "invalid object name"
    if absent and (
        not _hash_like(ref)
        or git(project, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False).returncode
        == 0
    ):
        return None
    raise WorkspaceError(
        f"cannot read {name} as committed on {ref} in {project}: "
        f"{proc.stderr.strip() or proc.returncode}"
    )


# --------------------------------------------------- keeping work reachable

DROPPED = "refs/owl/dropped/"
KEEP_DROPPED = 30 * 24 * 3600.0


def branch_tip(project: Path, branch: str) -> str | None:
    """The commit `branch` points to, None if there is no such branch.

    Raises WorkspaceError when git cannot say (not a repository any more)."""
    gone = project_problem(project)
    if gone:
        raise WorkspaceError(gone)
    proc = git(
        project, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}", check=False
    )
    if proc.returncode == 0:
        return proc.stdout.strip()
    if proc.returncode == 1 and not proc.stderr.strip():
        return None
    raise WorkspaceError(
        f"git cannot read branch {branch}: {proc.stderr.strip() or proc.returncode}"
    )


def own_commits(project: Path, branch: str, base: str | None) -> int:
    """How many commits only `branch` holds: not on its base, nor on any other
    branch or tag (dropping the branch would leave them unreachable)."""
    args = ["rev-list", "--count", f"refs/heads/{branch}"]
    if base:
        args.append(f"^{base}")
    # git before 2.41 matches --exclude for --branches against the short name,
    # later versions against the full one: say both
    args += [
        "--not",
        f"--exclude={branch}",
        f"--exclude=refs/heads/{branch}",
        "--branches",
        "--tags",
    ]
    proc = git(project, *args)
    try:
        return int(proc.stdout.strip())
    except ValueError:
        raise WorkspaceError(f"git rev-list said {proc.stdout.strip()!r}") from None


def keep_dropped(project: Path, branch: str, tip: str, now: float | None = None) -> str:
    """A ref under refs/owl/dropped/ that keeps `tip` reachable for KEEP_DROPPED
    (the one already there for this branch and tip, when a drop is done again)."""
    for ref, at in kept(project, branch):
        if at == tip:
            return ref
    ref = f"{DROPPED}{branch}/{int(time.time() if now is None else now)}"
    git(project, "update-ref", ref, tip, "")
    return ref


def kept(project: Path, branch: str) -> list[tuple[str, str]]:
    """The refs under refs/owl/dropped/ kept for `branch`, newest first: (ref, commit)."""
    out = git(
        project,
        "for-each-ref",
        "--sort=-refname",
        "--format=%(refname) %(objectname)",
        f"{DROPPED}{branch}/",
        check=False,
    ).stdout
    return [(ref, at) for ref, _, at in (line.partition(" ") for line in out.splitlines()) if at]


def prune_dropped(project: Path, now: float | None = None) -> list[str]:
    """Delete the refs/owl/dropped/ refs older than KEEP_DROPPED; returns them."""
    now = time.time() if now is None else now
    proc = git(project, "for-each-ref", "--format=%(refname)", DROPPED, check=False)
    gone = []
    for ref in proc.stdout.split():
        stamp = ref.rsplit("/", 1)[-1]
        if stamp.isdigit() and now - int(stamp) > KEEP_DROPPED:
            if git(project, "update-ref", "-d", ref, check=False).returncode == 0:
                gone.append(ref)
    return gone


# ------------------------------------------------------- a broken workspace


def project_problem(project: Path) -> str | None:
    """Why `project` cannot be worked in (gone, no longer a repository), or None.

    Reads files only (no git runs), so it is cheap enough for any thread."""
    p = Path(project)
    if not p.is_dir():
        return f"the project {p} is gone (moved or deleted)"
    try:
        common_dir(p)
    except OSError:
        return f"the project {p} is no longer a git repository"
    return None


def reach_problem(project: Path, worktree: Path) -> str | None:
    """Why the Job's worktree cannot reach the project's repository, or None.

    Files only: the worktree's `.git` file names its folder in the project's
    `.git/worktrees/`, and that folder's `commondir` leads back to the project."""
    gone = project_problem(project)
    if gone:
        return gone
    wt = Path(worktree)
    if not wt.is_dir():
        return None  # gone: re-added on the next Run
    try:
        mine = common_dir(wt).resolve()
    except OSError:
        return f"the worktree {wt} cannot reach its repository (its .git is missing or broken)"
    if mine == store_path(wt.resolve()):  # the Job's own store: its objects lead to the project's
        return None
    if mine != common_dir(Path(project)).resolve():
        return f"the worktree {wt} belongs to another repository ({mine})"
    return None
