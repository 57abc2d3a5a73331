"""A Job's own git store made, converted from an older worktree, and its branch brought in.

Why `owl.git.jobstore` (what the store is, its files, what Owl trusts) and this
module (the git that makes and reads it) are apart: this one runs git through
`owl.git.workspace`, which itself only needs to know where a store lies.
"""

from __future__ import annotations

import logging

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from owl.git import jobstore, workspace
from owl.git.gitdir import common_dir

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def ensure(
    project: Path,
    job_id: int,
    prefix: str,
    worktrees: Path,
    branch: str | None = None,
    worktree: Path | None = None,
    base: str | None = None,
) -> workspace.Workspace:
    """The Job's worktree and its store (`owl.git.jobstore`): made on first use
    from the project's current branch, and the same one (re-made from the
    branch if it was removed; given a store if made before stores) on every
    later Run. The store's branch is brought into the project first, so
    nothing a Run cut short committed is left behind."""
    gone = workspace.project_problem(project)
    if gone:
        raise workspace.WorkspaceError(gone)
    if branch is None or worktree is None:
        branch, worktree = workspace.fresh_names(project, job_id, prefix, worktrees)
    path = Path(worktree)
    if path.is_dir() and (path / ".git").exists():
        if linked_to_project(project, path):
            with workspace.changing_worktrees(project):
                _convert(project, path, branch)
        broken = workspace.reach_problem(project, path)
        if broken:
            raise workspace.WorkspaceError(broken)
        if base is None:
            base = workspace.git(project, "merge-base", "HEAD", branch).stdout.strip()
        return workspace.Workspace(branch, path, base)
    if path.exists():
        raise workspace.WorkspaceError(
            f"{path} exists but is not this Job's worktree (it has no .git: deleted during a Run?)"
        )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _land_left(project, path, branch)
    has_branch = (
        workspace.git(
            project, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False
        ).returncode
        == 0
    )
    if not has_branch:
        head = workspace.git(project, "rev-parse", "HEAD^{commit}").stdout.strip()
        workspace.git(project, "update-ref", f"refs/heads/{branch}", head, "")
        base = base or head
    try:
        create(project, path, branch)
    except jobstore.StoreError as e:
        raise workspace.WorkspaceError(str(e)) from None
    if base is None:
        base = workspace.git(project, "merge-base", "HEAD", branch).stdout.strip()
    return workspace.Workspace(branch, path, base)


def _convert(project: Path, path: Path, branch: str) -> None:
    try:
        convert(project, path, branch)
    except (jobstore.StoreError, OSError) as e:
        raise workspace.WorkspaceError(
            f"the worktree {path} could not be given a store: {e}"
        ) from None


def _land_left(project: Path, path: Path, branch: str) -> None:
    """A store whose worktree was removed (by the person, to start again from
    the branch): its branch is brought in, then the store goes."""
    store = jobstore.store_path(path)
    if not store.exists() and not store.is_symlink():
        return
    if not branch:
        raise workspace.WorkspaceError(f"the Job's store {store} names no branch; it is kept")
    p = jobstore.Places(str(path), str(store), None, None)
    try:
        land(project, p, branch)
    except jobstore.StoreError as e:
        raise workspace.WorkspaceError(f"{e}; the Job's store is kept at {store}") from None
    remove_store(path)


@contextlib.contextmanager
def _landing(store: str) -> Iterator[None]:
    with _locks_guard:
        lock = _locks.setdefault(store, threading.Lock())
    with lock:
        yield


def land(project: Path, p: jobstore.Places, branch: str) -> str | None:
    """Bring the store's `branch` into the project's; what was said of it, or None.

    Nothing when they agree. A tip the branch moved away from (the agent
    rewrote it) is kept under refs/owl/dropped/ first when it holds commits
    found nowhere else. Raises jobstore.StoreError (the reason) when it cannot."""
    if p.store is None:
        return None
    with _landing(p.store):
        scrubbed(p.store)
        new = jobstore.tip(p, branch)
        if new is None:
            return None  # the agent deleted its branch: the project's stays
        try:
            old = workspace.branch_tip(project, branch)
            if old == new:
                return None
            said = None
            if old is not None and not _is_ancestor(Path(p.store), old, new):
                n = workspace.own_commits(project, branch, None)
                if n:
                    kept = workspace.keep_dropped(project, branch, old)
                    said = f"the branch was rewritten; its old tip {old[:7]} is kept as {kept}"
            _fetch(project, p.store, branch)
        except workspace.WorkspaceError as e:
            raise jobstore.StoreError(
                f"its branch could not be brought into the project: {e}"
            ) from None
        return said


def scrubbed(store: str) -> None:
    """The store with no link or special file left for the host's git to
    follow (`jobstore.scrub`); what was removed is logged."""
    try:
        gone = jobstore.scrub(store)
    except OSError as e:
        raise jobstore.StoreError(
            f"the store {store} holds a link Owl cannot remove: {e}"
        ) from None
    if gone:
        logging.getLogger("owl.git").warning(
            "removed %d link(s) a Run left in the store %s: %s",
            len(gone),
            store,
            ", ".join(gone[:5]),
        )


def _is_ancestor(store: Path, old: str, new: str) -> bool:
    proc = workspace.git(store, "merge-base", "--is-ancestor", old, new, check=False)
    return proc.returncode == 0


FETCH_CONFIG = (
    ("protocol.file.allow", "always"),
    ("fetch.fsckObjects", "true"),
    ("transfer.fsckObjects", "true"),
    ("fetch.writeCommitGraph", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("fetch.prune", "false"),
    ("core.commitGraph", "false"),
    # the store's objects/ is the agent's to write: its indexes beside the
    # packs are not read (only the packs and their .idx, which git checks)
    ("core.multiPackIndex", "false"),
    ("pack.useBitmaps", "false"),
)
FETCH_ENV = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}


def _fetch(project: Path, store: str, branch: str) -> None:
    ref = f"refs/heads/{branch}"
    workspace.git(
        project,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-recurse-submodules",
        "--no-prune",
        "--no-auto-gc",
        store,
        f"+{ref}:{ref}",
        config=FETCH_CONFIG,
        env=FETCH_ENV,
    )


# --------------------------------------------------------- making and removing


def create(project: Path, worktree: Path, branch: str) -> jobstore.Places:
    """Make the Job's store beside `worktree` (which must not exist), its
    branch at the project's `branch`, and the worktree checked out from it."""
    wt = Path(os.path.realpath(worktree))
    store = jobstore.store_path(wt)
    project_git = Path(os.path.realpath(common_dir(project)))
    head = workspace.branch_tip(project, branch)
    if head is None:
        raise jobstore.StoreError(f"the project has no branch {branch}")
    if os.path.lexists(store):  # never another Job's: ensure brings a left store in first
        raise jobstore.StoreError(f"{store} is in the way of the Job's store")
    _init(store, project_git, branch, head)
    mirror(project, store, branch)
    workspace.git(store, "worktree", "add", "--no-checkout", str(wt), branch)
    p = jobstore.places(project, wt)
    if p.admin is None or not jobstore.real_dir(p.admin):
        raise jobstore.StoreError(f"git made the worktree's admin folder elsewhere than {p.admin}")
    workspace.git(wt, "reset", "--hard", "-q", "HEAD")
    return p


def _init(store: Path, project_git: Path, branch: str, head: str) -> None:
    """A bare store whose config is Owl's: the project's hooks and config (read
    where they are), bare all the same; the project's objects as an alternate."""
    store.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # the project's object format (sha1, or sha256), which the store must share
    fmt = workspace.git(project_git, "rev-parse", "--show-object-format").stdout.strip()
    fmt = fmt if fmt in ("sha1", "sha256") else "sha1"
    workspace.git(
        store.parent, "init", "--bare", "-q", "--template=", f"--object-format={fmt}", str(store)
    )
    extensions = "" if fmt == "sha1" else f"[extensions]\n\tobjectFormat = {fmt}\n"
    (store / "config").write_text(
        "[core]\n"
        f"\trepositoryformatversion = {0 if fmt == 'sha1' else 1}\n"
        f"\thooksPath = {_quoted(str(project_git / 'hooks'))}\n"
        "[include]\n"
        f"\tpath = {_quoted(str(project_git / 'config'))}\n"
        "[core]\n"
        "\tbare = true\n" + extensions
    )
    jobstore.write_file(str(store), "objects/info/alternates", f"{project_git}/objects\n")
    # the folders a Run writes must be there to be bound: the store's top is read only
    for folder in ("logs", "refs/heads", "refs/tags", "worktrees"):
        (store / folder).mkdir(parents=True, exist_ok=True)
    # the project's info/ (exclude, attributes) holds for the Job's worktree as
    # it did when the worktree shared the project's folder: read only, the person's
    if (project_git / "info").is_dir():
        os.symlink(project_git / "info", store / "info")
    jobstore.write_file(str(store), f"refs/heads/{branch}", head + "\n")
    jobstore.write_file(str(store), "HEAD", f"ref: refs/heads/{branch}\n")


MIRRORED = ("refs/heads/", "refs/tags/", "refs/remotes/")


def mirror(project: Path, store: Path | str, branch: str) -> None:
    """The project's branches, tags and remote branches as the store's
    packed-refs (all but the Job's own branch, which the store keeps loose):
    the agent sees `main` and `origin/main` as they are when its Run starts.
    The store's top is Owl's alone, so this file is never the agent's; a ref
    the agent moves in its store is a loose one over it, reported, and never
    brought into the project."""
    out = workspace.git(
        project,
        "for-each-ref",
        "--format=%(objectname) %(refname) %(*objectname)",
        *MIRRORED,
    ).stdout
    lines = []
    for row in sorted(out.splitlines(), key=lambda r: r.split(" ")[1].encode()):
        sha, name, peeled = (row.split(" ") + ["", ""])[:3]
        if name == f"refs/heads/{branch}" or not sha:
            continue
        lines.append(f"{sha} {name}\n" + (f"^{peeled}\n" if peeled else ""))
    text = "# pack-refs with: peeled fully-peeled sorted \n" + "".join(lines)
    jobstore.write_file(str(store), "packed-refs", text)


def _quoted(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def convert(project: Path, worktree: Path, branch: str) -> jobstore.Places:
    """A worktree made before Jobs had stores (linked to the project): give it
    a store and link it there, its files and index as they are; the project's
    admin folder for it is removed. Nothing committed moves: the branch is the
    project's, and the store starts at its tip."""
    wt = Path(os.path.realpath(worktree))
    project_git = Path(os.path.realpath(common_dir(project)))
    old_admin = _old_admin(project_git, wt)
    head = workspace.branch_tip(project, branch)
    if head is None:
        raise jobstore.StoreError(f"the project has no branch {branch}")
    store = jobstore.store_path(wt)
    if os.path.lexists(store):  # never another Job's: ensure brings a left store in first
        raise jobstore.StoreError(f"{store} is in the way of the Job's store")
    _init(store, project_git, branch, head)
    mirror(project, store, branch)
    name = wt.name
    admin = f"worktrees/{name}"
    jobstore.write_file(str(store), f"{admin}/HEAD", f"ref: refs/heads/{branch}\n")
    jobstore.write_file(str(store), f"{admin}/commondir", "../..\n")
    jobstore.write_file(str(store), f"{admin}/gitdir", f"{wt}/.git\n")
    index = old_admin / "index" if old_admin is not None else None
    kept_index = False
    if index is not None and index.is_file() and not index.is_symlink():
        shutil.copyfile(index, store / admin / "index")
        kept_index = True
    jobstore.write_file(str(wt), ".git", f"gitdir: {store / admin}\n")
    if old_admin is not None:
        shutil.rmtree(old_admin, ignore_errors=True)
    if not kept_index:
        workspace.git(wt, "reset", "-q")  # the index from HEAD, the files as they are
    return jobstore.places(project, wt)


def _old_admin(project_git: Path, wt: Path) -> Path | None:
    """The project's admin folder for `wt`: a folder directly in its
    `worktrees/` whose `gitdir` names `wt/.git` (never a path the worktree's
    own `.git` file gives)."""
    folder = project_git / "worktrees"
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            said = jobstore.read_file(str(folder), f"{entry.name}/gitdir")
        except OSError:
            continue
        if said is not None and os.path.realpath(said.strip()) == str(wt / ".git"):
            return Path(entry.path)
    return None


def linked_to_project(project: Path, worktree: Path) -> bool:
    """Whether the worktree is one made before Jobs had stores: its store is
    missing and the project's `worktrees/` has an admin folder for it."""
    wt = Path(os.path.realpath(worktree))
    if jobstore.real_dir(jobstore.store_path(wt)):
        return False
    try:
        return _old_admin(common_dir(project), wt) is not None
    except OSError:
        return False


def remove_store(worktree: Path | str) -> None:
    """Remove the store of the worktree at `worktree` (links inside are removed, never followed)."""
    store = jobstore.store_path(os.path.realpath(worktree))
    if jobstore.real_dir(store):
        shutil.rmtree(store)
    elif store.is_symlink():
        store.unlink()
