"""What a Run changed outside its branch: refs, git config, hooks.

A contained Run commits into its Job's own store (`owl.git.jobstore`) and
cannot write the project's `.git`; an uncontained one (`sandbox.mode =
"off"`, or a Mac) still can: move `main`, plant a hook, or set
`core.fsmonitor` for the person's next `git status`. Either way Owl looks: a
`Snapshot` of the project's refs, its config file (and the person's
`~/.gitconfig`), its hooks folder and the refs of the Job's own store is
taken before a Run starts and after it ends, and `changes()` lists what
differs, as the JSON list kept in `runs.outside` (a move in the store is
reported as `store-ref`: attempted, never brought into the project):

    [{"kind": "ref", "name": "refs/heads/main", "from": "a1b2…", "to": "e4f5…"},
     {"kind": "config", "name": "core.fsmonitor", "from": null, "to": "./payload.sh"},
     {"kind": "hook", "name": "post-checkout", "from": null, "to": "3f2a… (executable)"}]

`from`/`to` are null where the thing did not exist. Kinds: `ref`, `config`
(the project's `.git/config`), `global-config` (`~/.gitconfig` and
`$XDG_CONFIG_HOME/git/config`), `hook`, `store-ref` (a ref of the Job's own
store), `git-file` (a worktree's git file found changed after the Run:
`from` is what Owl wrote), and `unknown` (nothing could be compared; `to`
says why).

`take()` only reads files (no git runs), yet a project with thousands of
loose refs makes that a walk of thousands of files, so the start's snapshot
is taken as the last step of the Job's setup, off the engine thread, just
before the agent starts; turning the two config texts into settings runs git
and belongs off the engine thread too (`config_settings`).

The start's snapshot lives in the daemon's memory, and also on disk beside
the Run's log (`to_json`, kept by `owl.git.outsidekeep`): a daemon killed during
the Run loses the first, and its crash recovery compares the second with the
project as it is then, so the Run closed `interrupted` still says what its
agent changed. A project that cannot be read then gives an `unknown` entry.

Each change is said in words by `owl.git.outsidewords`, the same in every view.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from owl.git.gitdir import common_dir

_HOOK_READ = 1024 * 1024
_MAX_REFS = 100_000


@dataclass(frozen=True)
class Snapshot:
    """One moment of a project's shared git state, as raw as it was read."""

    loose: dict[str, str] = field(default_factory=dict)  # name -> sha or "ref: target"
    packed: bytes | None = None  # packed-refs, parsed when compared
    config: bytes | None = None
    global_config: bytes | None = None
    hooks: dict[str, str] = field(default_factory=dict)  # file name -> digest
    problem: str | None = None  # why it could not be read
    # The refs of the Job's own store (owl.git.jobstore), packed and loose:
    # what the agent did there to refs other than its branch is reported too,
    # though it never reaches the project.
    store_refs: dict[str, str] = field(default_factory=dict)

    @property
    def refs(self) -> dict[str, str]:
        """Every ref, packed ones overridden by loose ones (as git reads them)."""
        out = _packed(self.packed)
        out.update(self.loose)
        return out


def take(project: Path, store: str | None = None) -> Snapshot:
    """The project's refs, config and hooks as they are now (files only), and
    the refs of the Job's `store` when it has one."""
    try:
        gitdir = common_dir(project)
        return Snapshot(
            loose=_refs(gitdir),
            packed=_read(gitdir / "packed-refs"),
            config=_read(gitdir / "config"),
            global_config=_global_config(),
            hooks=_hooks(gitdir / "hooks"),
            store_refs=_store_refs(store),
        )
    except OSError as e:
        return Snapshot(problem=f"{project}: {e}")


def _store_refs(store: str | None) -> dict[str, str]:
    """The store's refs (HEAD left out: a worktree's own is in its admin folder).
    The walk follows no link; a store that cannot be read says so as one ref."""
    if store is None:
        return {}
    out = _packed(_read_nofollow(Path(store) / "packed-refs"))
    loose: dict[str, str] = {}
    try:
        _loose(Path(store) / "refs", "refs", loose)
    except OSError as e:
        return {"(the store)": f"unreadable: {e}"}
    out.update(loose)
    return out


def _read_nofollow(path: Path) -> bytes | None:
    try:
        return _small(str(path), 16 * 1024 * 1024)
    except FileNotFoundError:
        return None
    except OSError:
        return None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _global_config() -> bytes | None:
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git" / "config"
    parts = [p for p in (_read(home / ".gitconfig"), _read(xdg)) if p is not None]
    return b"\n".join(parts) if parts else None


def _packed(data: bytes | None) -> dict[str, str]:
    refs: dict[str, str] = {}
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        if line.startswith(("#", "^")) or " " not in line:
            continue
        sha, name = line.split(" ", 1)
        refs[name.strip()] = sha
    return refs


def _refs(gitdir: Path) -> dict[str, str]:
    """The loose refs under `refs/`, plus HEAD (packed ones are kept raw)."""
    refs: dict[str, str] = {}
    _loose(gitdir / "refs", "refs", refs)
    head = _read(gitdir / "HEAD")
    if head is not None:
        refs["HEAD"] = head.decode("utf-8", "replace").strip()
    return refs


def _small(path: str, limit: int) -> bytes:
    """The first `limit` bytes of a file, in as few system calls as Python allows."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _loose(folder: Path, prefix: str, refs: dict[str, str]) -> None:
    """Loose refs under `folder` into `refs` (a scandir walk: this runs before every Run)."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        name = f"{prefix}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            _loose(Path(entry.path), name, refs)
        elif not entry.name.endswith(".lock"):
            try:
                refs[name] = _small(entry.path, 4096).decode("utf-8", "replace").strip()
            except OSError:
                continue
            if len(refs) > _MAX_REFS:
                raise OSError(f"more than {_MAX_REFS} refs: not compared")


def _hooks(folder: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return out
    for entry in entries:
        if entry.is_symlink():
            try:
                out[entry.name] = f"a link to {os.readlink(entry.path)}"
            except OSError as e:
                out[entry.name] = f"a link ({e.strerror})"
            continue
        if entry.is_dir(follow_symlinks=False):
            out[entry.name] = "a folder"
            continue
        try:
            digest = hashlib.sha256(_small(entry.path, _HOOK_READ)).hexdigest()[:16]
            executable = os.access(entry.path, os.X_OK)
        except OSError as e:
            digest, executable = f"unreadable ({e.strerror})", False
        out[entry.name] = digest + (" (executable)" if executable else "")
    return out


# ------------------------------------------------------------------ keeping

_FORMAT = 1


def to_json(snap: Snapshot) -> str:
    """The snapshot as JSON text: the raw files in base64, so `from_json` gives
    back exactly what `changes` compares (config texts included)."""

    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode("ascii")

    return json.dumps(
        {
            "format": _FORMAT,
            "loose": snap.loose,
            "packed": b64(snap.packed),
            "config": b64(snap.config),
            "global_config": b64(snap.global_config),
            "hooks": snap.hooks,
            "problem": snap.problem,
            "store_refs": snap.store_refs,
        }
    )


def from_json(text: str | bytes) -> Snapshot:
    """The snapshot `to_json` wrote; ValueError (one line) if `text` is not one."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise ValueError(f"not a snapshot of format {_FORMAT}")

    def names(key: str) -> dict[str, str]:
        value = data.get(key)
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ValueError(f"{key} is not a map of names to text")
        return value

    def raw(key: str) -> bytes | None:
        value = data.get(key)
        if value is None:
            return None
        try:
            return base64.b64decode(value, validate=True)
        except (TypeError, ValueError):
            raise ValueError(f"{key} is not base64") from None

    problem = data.get("problem")
    if problem is not None and not isinstance(problem, str):
        raise ValueError("problem is not text")
    return Snapshot(
        loose=names("loose"),
        packed=raw("packed"),
        config=raw("config"),
        global_config=raw("global_config"),
        hooks=names("hooks"),
        problem=problem,
        store_refs=names("store_refs") if data.get("store_refs") is not None else {},
    )


# ------------------------------------------------------------------ comparing


def config_settings(text: bytes | None) -> dict[str, str]:
    """A config file's settings (`key -> value`, repeated keys joined by newlines).

    Runs `git config --file -` through Owl's safe git, the text on its input:
    a copy in a temporary folder could be swapped under git by a Run where
    that folder is shared with it (macOS's `/tmp`)."""
    from owl.git.workspace import git

    if not text:
        return {}
    proc = git(
        tempfile.gettempdir(), "config", "--file", "-", "--list", "-z", check=False, stdin=text
    )
    if proc.returncode != 0:
        return {"(the file)": "does not parse: " + (proc.stderr.strip() or "git config failed")}
    out: dict[str, str] = {}
    for entry in proc.stdout.split("\0"):
        if not entry:
            continue
        key, _, value = entry.partition("\n")
        out[key] = f"{out[key]}\n{value}" if key in out else value
    return out


def changes(
    before: Snapshot,
    after: Snapshot,
    *,
    ignore_ref: Callable[[str], bool],
    settings: Callable[[bytes | None], dict[str, str]] = config_settings,
) -> list[dict[str, Any]] | None:
    """What differs between two snapshots, in the `runs.outside` shape; None
    when the first could not be read (so nothing can be said).

    `ignore_ref(name)` is True for refs that are not news (the Job's own
    branch, other Jobs' branches, Owl's own `refs/owl/`)."""
    if before.problem:
        return None  # never read at the start: nothing to compare with
    if after.problem:
        return [unknown(after.problem)]
    out = [
        dict(kind="ref", name=n, **d)
        for n, d in _diff(before.refs, after.refs).items()
        if not ignore_ref(n)
    ]
    for kind, a, b in (
        ("config", before.config, after.config),
        ("global-config", before.global_config, after.global_config),
    ):
        if a != b:
            out += [
                dict(kind=kind, name=n, **d) for n, d in _diff(settings(a), settings(b)).items()
            ]
    out += [dict(kind="hook", name=n, **d) for n, d in _diff(before.hooks, after.hooks).items()]
    if before.store_refs:  # a Job with a store of its own when the Run began
        out += [
            dict(kind="store-ref", name=n, **d)
            for n, d in _diff(before.store_refs, after.store_refs).items()
            if not ignore_ref(n)
        ]
    return out


def unknown(why: str, what: str = "the project's git folder") -> dict[str, Any]:
    """The entry for a comparison that could not be made: `what` could not be read."""
    return {"kind": "unknown", "name": what, "from": None, "to": why}


def _diff(a: dict[str, str], b: dict[str, str]) -> dict[str, dict[str, str | None]]:
    return {
        k: {"from": a.get(k), "to": b.get(k)}
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    }


def moves(before: Snapshot, after: Snapshot) -> dict[str, tuple[str | None, str | None]]:
    """The refs that differ between two snapshots: name -> (from, to)."""
    a, b = before.refs, after.refs
    return {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}


def with_moves(snap: Snapshot, moved: dict[str, tuple[str | None, str | None]]) -> Snapshot:
    """`snap` as if the `moved` refs had been there from the start (where it agrees
    with their `from`): Owl's own moves during a Run are not the agent's."""
    refs = snap.refs
    for name, (old, new) in moved.items():
        if refs.get(name) == old:
            if new is None:
                refs.pop(name, None)
            else:
                refs[name] = new
    return replace(snap, loose=refs, packed=None)


def owned_ref(branch: str | None, others: set[str]) -> Callable[[str], bool]:
    """The refs a Run's report leaves out: its branch, other Jobs' branches, refs/owl/."""
    mine = {f"refs/heads/{b}" for b in (others | {branch or ""}) if b}

    def ignore(name: str) -> bool:
        return name in mine or name.startswith("refs/owl/")

    return ignore


def shared(items: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The changes of a Run the person worked beside (started with `owl start`,
    or run during a Shift): their own commits and settings land in the same
    `.git`, so each change is marked as possibly theirs (`"shared": true`)."""
    return None if items is None else [dict(c, shared=True) for c in items]
