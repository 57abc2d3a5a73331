"""A Job's own git store: where its Runs commit, with the project's history out of reach.

Why. An agent commits, so a Run must write git objects and move its branch.
Given the project's own `.git` to write, an agent could move `main`, tags or
other Jobs' branches, delete or repack the project's objects, or add
alternates, and the person's history would be gone or redirected. So each Job
has a store of its own beside its worktree (`worktrees/job-N.git`, in Owl's
data folder): a bare repository whose only object source besides its own
objects is the project's object folder, named as a read-only alternate; the
worktree is a linked worktree of that store. A Run may write the store's
objects, refs, logs and the worktree's own admin folder, and nothing else of
git: the store's top (its `config`, `hooks`, `info`, `packed-refs`) and the
whole of the project's `.git` are read-only inside. As each Run's agent
exits, at the Run's end, before the next Run, after a crash, and at accept and
drop, Owl brings the Job's branch into the project with its own safe git
(`owl.git.storing.land`): a `git fetch` from the store into the project's
`refs/heads/<branch>` and nothing else. This module says where a store lies
and checks its files (no git runs); `owl.git.storing` makes it and fetches.

Rejected: a per-Job object folder with the project as a linked worktree, as
before. The branch's ref lives in the project's shared `refs/`, beside `main`
and every other Job's branch: writing one means writing all. Rejected: `git
clone --shared` into the worktree. Its `.git` would be a folder inside the
writable worktree: the agent could rename it and make its own, with a config
and hooks that the person's next `git status` in that worktree runs (today's
worktree keeps the project's config and hooks read-only). The bare store
outside the worktree keeps that layout: its config and hooks are Owl's, and
read-only inside the Run, like the project's were.

How the branch is brought in, as an attacker would see it. The agent controls
the store's objects and refs (and the alternates file under objects/), not its
config, hooks or packed-refs. Owl's fetch runs `git upload-pack` in the store:
the store's config is Owl's (it includes the project's own config, which the
agent cannot write either); `uploadpack.packObjectsHook` is honoured by git
only from the system, global or command-line config, never a repository's;
hooks, fsmonitor and every driver are off for Owl's git as for all its calls
(`owl.git.safegit`); replace refs and grafts are ignored
(`GIT_NO_REPLACE_OBJECTS`, `GIT_GRAFT_FILE`); only `refs/heads/<branch>` is
fetched (`--no-tags`, one refspec), so nothing else of the store reaches the
project; and every object received is checked by `index-pack` (its hash) and
by `fetch.fsckObjects` (its form: no `.git` or `..` path in a tree, no bad
`.gitmodules`). A branch the agent rewrote (amend, rebase) is still brought
in; the tip it replaced, when it holds commits found nowhere else, is kept
under `refs/owl/dropped/` as a drop keeps one, so nothing committed is lost.

What the worktree's git files say is never believed. Every bind of a Run and
of a check is computed from Owl's records (`places`: the worktree's path from
the store, its store beside it by name, the project's git folder found from
the project's own files, which no Run may write), with realpath. The files an
agent could rewrite to steer git elsewhere (the worktree's `.git`, the admin
folder's `gitdir` and `commondir`, the store's alternates) are compared with
what Owl wrote (`verify`) before every Run and after it, and put back
(`restore`) when they differ; the Job is then blocked with the reason, and
the Run's report says what was found. Owl reads and writes them without
following a symbolic link anywhere below the folder it trusts.

Cost (`bench/job_store.py`, 20,000 files and 2,000 tags): setting up a
worktree with its store took a median 1.77 s against 1.75 s for the worktree
linked to the project as before (+1 %): the checkout is most of either, and
the store is an `init`, a few small files and a `packed-refs` of the
project's branches and tags. Bringing a branch in after a Run took 160 ms
(median; a fetch of one branch, on the agent's waiting thread). Rejected for that reason too: a full clone,
whose objects would be copied (`--shared` avoids that, not its `.git` in the
worktree).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from owl.git.gitdir import common_dir, store_path

__all__ = [
    "Places",
    "places",
    "store_path",
    "read_file",
    "write_file",
    "verify",
    "restore",
    "scrub",
]

_READ = 4096


class StoreError(Exception):
    """The Job's store cannot be made, read or brought in; str() says why."""


@dataclass(frozen=True)
class Places:
    """Where a Job's git lives, from Owl's own records, every path real.

    `store` and `admin` are None for a worktree made before Jobs had stores
    (linked to the project itself): it is converted at its next Run."""

    worktree: str
    store: str | None
    admin: str | None
    project_git: str | None  # the project's own git folder: read only

    def expected(self) -> dict[str, tuple[str, str, str]]:
        """name -> (trusted folder, path below it, what it must say)."""
        if self.store is None or self.admin is None:
            return {}
        name = os.path.basename(self.admin)
        out = {
            ".git": (self.worktree, ".git", f"gitdir: {self.admin}"),
            "gitdir": (self.store, f"worktrees/{name}/gitdir", f"{self.worktree}/.git"),
            "commondir": (self.store, f"worktrees/{name}/commondir", "../.."),
        }
        if self.project_git:
            out["alternates"] = (
                self.store,
                "objects/info/alternates",
                f"{self.project_git}/objects",
            )
        return out


def places(project: Path | str, worktree: Path | str) -> Places:
    """The Job's git places from its project and worktree paths (files only:
    the project's `.git`, which no Run may write; nothing in the worktree)."""
    wt = os.path.realpath(worktree)
    try:
        project_git: str | None = os.path.realpath(common_dir(Path(project)))
    except OSError:
        project_git = None
    store = store_path(wt)
    if real_dir(store):
        return Places(wt, str(store), str(store / "worktrees" / Path(wt).name), project_git)
    return Places(wt, None, None, project_git)


def real_dir(path: Path | str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


# ----------------------------------------------------- files, no link followed


@contextlib.contextmanager
def _folder(base: str, parts: list[str], make: bool = False) -> Iterator[int]:
    """A descriptor of `base/parts...`, no symbolic link followed below `base`."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if part in ("", ".", ".."):
                raise OSError(f"{part!r} in a path")
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            nxt = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def read_file(base: str, rel: str) -> str | None:
    """The text of `base/rel` (its first 4 KB), None if it is missing; OSError
    (a link, a folder, unreadable) if it is not a plain file."""
    *folders, name = rel.split("/")
    try:
        with _folder(base, folders) as d:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=d)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(f"{rel} is not a plain file")
                return os.read(fd, _READ).decode("utf-8", "replace")
            finally:
                os.close(fd)
    except FileNotFoundError:
        return None


def write_file(base: str, rel: str, text: str) -> None:
    """Write `base/rel` as a new file renamed over the old (a link there is
    replaced, never followed); its folders are made when missing."""
    *folders, name = rel.split("/")
    with _folder(base, folders, make=True) as d:
        tmp = f".{name}.owl-{os.getpid()}-{threading.get_ident()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=d)
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=d,
        )
        try:
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        try:
            os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=d)
            raise


# ------------------------------------------------------------ the git files


def verify(p: Places) -> list[dict[str, str | None]]:
    """The git files that differ from what Owl wrote, as outside-the-branch
    entries (`kind` "git-file", `from` what Owl wrote, `to` what is there)."""
    out: list[dict[str, str | None]] = []
    for name, (base, rel, want) in p.expected().items():
        try:
            found = read_file(base, rel)
            said = None if found is None else found.strip()
        except OSError as e:
            said = f"(not a plain file: {e.strerror or e})"
        if said != want:
            out.append({"kind": "git-file", "name": name, "from": want, "to": said})
    return out


def restore(p: Places, found: list[dict[str, str | None]]) -> list[str]:
    """Write back what Owl wrote for each file `verify` found changed; the ones
    that could not be (a folder put in a file's place), in words."""
    expected = p.expected()
    failed = []
    for entry in found:
        name = str(entry["name"])
        if name not in expected:
            continue
        base, rel, want = expected[name]
        try:
            write_file(base, rel, want + "\n")
        except OSError as e:
            failed.append(f"{name}: {e.strerror or e}")
    return failed


def tampered_reason(job_id: int, found: list[dict[str, str | None]], failed: list[str]) -> str:
    """A blocked Job's reason for git files a Run rewrote."""
    said = "; ".join(f"{e['name']} said {e['to']!r}" for e in found[:3])
    put = (
        f"Owl could not put back {', '.join(failed)}"
        if failed
        else "Owl has put them back as it made them"
    )
    return (
        f"the worktree's git files were changed ({said}), which would steer the next Run's "
        f"git elsewhere; {put}: look at the worktree, then owl jobs extend {job_id}, or "
        f"owl jobs drop {job_id}"
    )


# ------------------------------------------------- no link for the host's git


def scrub(store: str) -> list[str]:
    """Remove every link and every file that is neither a plain file nor a
    folder (a FIFO, a socket, a device) from the Job's store: what it names.

    Why: a Run writes the store's `objects/`, `refs/`, `logs/` and its
    worktree's admin folder, and the host's git later follows a link there
    as the person: an `update-ref` at accept appends to the reflog under
    `logs/`, and a reflog that is a link to `~/.bashrc` would have that file
    appended to; a ref or a `packed-refs` that is a link reads a file the
    person's git was never meant to. Git itself never makes a link or a
    special file in a repository, so whatever is one was planted. Called
    before every git of Owl's that works in the store (bringing the branch
    in, signing at accept). Only the folders a Run writes are walked: the
    store's top is Owl's (read-only inside; its `info` is Owl's own link to
    the project's). Folders are walked without following a link; a path
    that cannot be removed raises OSError."""
    found: list[str] = []
    for part in RUN_WRITES:
        folder = os.path.join(store, part)
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(mode):
            os.unlink(folder)
            found.append(part)
            continue
        found += _scrub_below(store, folder)
    return found


# The folders of a store a Run may write (`owl.sandbox.policy`).
RUN_WRITES = ("objects", "refs", "logs", "worktrees")


def _scrub_below(store: str, folder: str) -> list[str]:
    found: list[str] = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        keep = []
        for name in [*dirs, *files]:
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
                if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                    os.unlink(path)
                    found.append(os.path.relpath(path, store))
            except FileNotFoundError:  # gone meanwhile (git's own lock files come and go)
                continue
            if stat.S_ISDIR(mode):
                keep.append(name)
        dirs[:] = [d for d in dirs if d in keep]
    return found


# ------------------------------------------------------------ the branch


def tip(p: Places, branch: str) -> str | None:
    """The commit the store's `branch` names (a loose ref, else packed-refs),
    read without following a link; StoreError if it is not a commit id."""
    assert p.store is not None
    try:
        text = read_file(p.store, f"refs/heads/{branch}")
        if text is None:
            text = _packed(read_file(p.store, "packed-refs") or "", f"refs/heads/{branch}")
    except OSError as e:
        raise StoreError(f"the store's branch {branch} cannot be read: {e}") from None
    if text is None:
        return None
    value = text.strip()
    if len(value) not in (40, 64) or any(c not in "0123456789abcdef" for c in value):
        raise StoreError(f"the store's branch {branch} is not a commit ({value[:60]!r})")
    return value


def _packed(text: str, ref: str) -> str | None:
    for line in text.splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref:
            return sha
    return None
