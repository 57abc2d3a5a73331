"""A Job's changes read from git within a fixed memory bound, whatever the commit holds.

An agent's commit may hold a 10 GB sparse file (a few MB in git, since zeros
compress) or a million paths. Read naively, `git diff` of a file it adds or
deletes loads the whole blob (git 2.39 does so even for a binary one, to say
"Binary files differ"), counting its lines costs git about eleven times its
size, and a million paths make a listing and a page of hundreds of MB. So:

- every listing is read from a pipe as git writes it (`workspace.git_stream`),
  keeping the first `FILES_MAX` files and counting the rest;
- sizes come from the objects' headers (`git cat-file --batch-check`), never
  from their content, and git counts lines only of blobs up to
  `workspace.BIG_BLOB` (`core.bigFileThreshold`): a larger file is summarised
  by its size ("bin/data.img: 2.0 GB, not shown");
- a patch is asked for only of files under that size (paths given to git,
  a batch at a time, when the commit holds a larger one), and read up to a cap.

Paths keep git's own bytes for the pathspecs given back to it (`arg`, with
undecodable bytes escaped as the file system does) and a readable form to show.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from owl.git import workspace

FILES_MAX = 1000  # files listed by name; the rest are counted ("… and 99,000 more files")
READ_CHUNK = 1 << 16
BATCH_FILES = 1000  # files per `cat-file` or per patch asked for a batch at a time
BATCH_ARG_BYTES = 256 << 10  # paths on one git command line (the kernel allows ~2 MB in all)
ZERO = "0" * 40


class ChangesError(Exception):
    """git could not read the branch; str() is git's own last word."""


@dataclass
class Change:
    """One changed file: what `git diff --raw` and `--numstat` say of it."""

    path: str  # to show: bytes that are not UTF-8 replaced
    arg: str  # to give back to git: its bytes as the file system decodes them
    status: str  # A, D, M, T
    old_oid: str
    new_oid: str
    old_size: int = 0
    new_size: int = 0
    added: int | None = None  # None: binary, or too big to count
    removed: int | None = None

    @property
    def size(self) -> int:
        return max(self.old_size, self.new_size)

    @property
    def big(self) -> bool:
        """Too big to read: never diffed, summarised by its size."""
        return self.size > workspace.BIG_BLOB


@dataclass
class Listing:
    files: list[Change]  # the first FILES_MAX, in git's order
    total: int  # every file changed
    added: int  # lines, over every file git counted (see counted_all)
    removed: int
    counted_all: bool = True  # False: lines counted in the listed files only

    @property
    def more(self) -> int:
        return self.total - len(self.files)


def size_words(n: int) -> str:
    """A file's size as a person reads it: "812 bytes", "4.2 MB", "2.0 GB"."""
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KB", "MB", "GB", "TB"):
        n_f = n / 1024
        if n_f < 1024 or unit == "TB":
            return f"{n_f:.1f} {unit}"
        n = int(n_f)
    return f"{n} TB"  # pragma: no cover


def summary(c: Change) -> str:
    """A file too big to read, in words: "bin/data.img: 2.0 GB, not shown"."""
    return f"{c.path}: {size_words(c.size)}, not shown"


def _tokens(pipe: IO[bytes]) -> Iterator[bytes]:
    """The NUL-ended fields of git's `-z` output, read a chunk at a time."""
    rest = b""
    while True:
        chunk = pipe.read(READ_CHUNK)
        if not chunk:
            break
        parts = (rest + chunk).split(b"\0")
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def _decoded(raw: bytes) -> tuple[str, str]:
    return raw.decode("utf-8", "replace"), os.fsdecode(raw)


def _raw_change(header: bytes, path: bytes) -> Change | None:
    """`:100644 100644 OLD NEW M` and its path as a Change (None if not one)."""
    parts = header[1:].split()
    if len(parts) < 5:
        return None
    shown, arg = _decoded(path)
    old, new = parts[2].decode("ascii", "replace"), parts[3].decode("ascii", "replace")
    return Change(shown, arg, parts[4][:1].decode("ascii", "replace"), old, new)


def _failed(s: object, what: str) -> ChangesError:
    words = (getattr(s, "stderr", "") or "").strip().splitlines()
    fatal = [w for w in words if w.startswith(("fatal:", "error:"))]
    return ChangesError((fatal or words or [f"git {what} failed"])[0])


@contextlib.contextmanager
def _git(project: Path, *args: str, stdin: bytes | IO[bytes] | None = None) -> Iterator[IO[bytes]]:
    """git's output as a pipe; ChangesError if git fails (not if the reader stopped)."""
    try:
        with workspace.git_stream(project, *args, config=workspace.BOUNDED, stdin=stdin) as s:
            yield s.stdout
    except (OSError, workspace.WorkspaceError) as e:
        raise ChangesError(str(e)) from None
    if s.returncode != 0 and not s.closed_early:
        raise _failed(s, args[0])


def listing(project: Path, base: str, branch: str, limit: int = FILES_MAX) -> Listing:
    """The files `branch` changes since it forked from `base`: the first `limit`
    with their sizes and line counts, and how many there are in all.

    The count comes from `--raw` (trees only: a million paths in seconds); lines
    are counted (`--numstat`, every blob read) over every file only when all
    are listed, else over the listed ones (`Listing.counted_all`)."""
    files: list[Change] = []
    index: dict[bytes, Change] = {}
    total = 0
    args = ("diff", "--raw", "-z", "--no-renames", "--no-abbrev", f"{base}...{branch}")
    with _git(project, *args) as pipe:
        tokens = _tokens(pipe)
        for tok in tokens:
            path = next(tokens, b"")  # a raw record's path is the field after it
            total += 1
            change = _raw_change(tok, path) if len(files) < limit else None
            if change is not None:
                files.append(change)
                index[path] = change
    sizes(project, files)
    every = total == len(files)
    added, removed = _count_lines(project, base, branch, index, None if every else files)
    return Listing(files, total, added, removed, counted_all=every)


def _count_lines(
    project: Path,
    base: str,
    branch: str,
    index: dict[bytes, Change],
    only: list[Change] | None,
) -> tuple[int, int]:
    """`git diff --numstat` (a huge blob not read: `workspace.BOUNDED`) of every
    file, or of `only`: each listed file's counts filled in, and the sums."""
    added = removed = 0
    groups: list[list[Change] | None] = [None] if only is None else list(batches(only))
    for group in groups:
        args = ["diff", "--numstat", "-z", "--no-renames", f"{base}...{branch}"]
        if group is not None:
            args += ["--", *(f":(literal){c.arg}" for c in group)]
        with _git(project, *args) as pipe:
            for tok in _tokens(pipe):
                a, _, rest = tok.partition(b"\t")  # ADDED \t REMOVED \t PATH
                d, _, path = rest.partition(b"\t")
                if not (a.isdigit() and d.isdigit()):
                    continue  # binary, or too big to count
                added, removed = added + int(a), removed + int(d)
                change = index.get(path)
                if change is not None:
                    change.added, change.removed = int(a), int(d)
    return added, removed


def sizes(project: Path, files: list[Change]) -> None:
    """Fill each file's old and new size from its objects' headers, a batch at a time."""
    for i in range(0, len(files), BATCH_FILES):
        batch = files[i : i + BATCH_FILES]
        oids = {o for c in batch for o in (c.old_oid, c.new_oid) if o != ZERO}
        if not oids:
            continue
        found: dict[str, int] = {}
        stdin = "".join(f"{o}\n" for o in sorted(oids)).encode()
        with _git(project, "cat-file", "--batch-check", stdin=stdin) as pipe:
            for line in pipe:
                parts = line.split()
                if len(parts) == 3 and parts[2].isdigit():
                    found[parts[0].decode()] = int(parts[2])
        for c in batch:
            c.old_size, c.new_size = found.get(c.old_oid, 0), found.get(c.new_oid, 0)


def _patch_args(
    base: str, branch: str, paths: list[Change] | None, renames: bool = False
) -> list[str]:
    """`git diff` of the branch, of `paths` only when given (then without renames:
    a rename's two paths may fall in two batches)."""
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv"]
    if paths is None:
        return [*args, *([] if renames else ["--no-renames"]), f"{base}...{branch}"]
    literal = (f":(literal){c.arg}" for c in paths)
    return [*args, "--no-renames", f"{base}...{branch}", "--", *literal]


def batches(files: list[Change]) -> Iterator[list[Change]]:
    """`files` in runs short enough for one git command line."""
    batch: list[Change] = []
    size = 0
    for c in files:
        cost = len(c.arg.encode("utf-8", "surrogateescape")) + 12
        if batch and (len(batch) >= BATCH_FILES or size + cost > BATCH_ARG_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(c)
        size += cost
    if batch:
        yield batch


def patch_text(
    project: Path, base: str, branch: str, listed: Listing, limit: int
) -> tuple[str, bool]:
    """The patch of the listed files under the size cap, read up to about `limit`
    bytes; and whether git had more to say than was read."""
    whole = not listed.more and not any(c.big for c in listed.files)
    groups: list[list[Change] | None] = [None]
    if not whole:
        groups = list(batches([c for c in listed.files if not c.big]))
    out = bytearray()
    more = False
    for group in groups:
        with _git(project, *_patch_args(base, branch, group)) as pipe:
            while len(out) <= limit:
                chunk = pipe.read(min(READ_CHUNK, limit + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
            if len(out) > limit:
                more = True
        if more:
            break
    return out.decode("utf-8", "replace"), more


def write_patch(
    project: Path, base: str, branch: str, write: Callable[[bytes], object]
) -> list[Change]:
    """The branch's whole patch handed to `write` a chunk at a time, every file
    over the size cap left out; those files (the first FILES_MAX of them).

    With no such file, one `git diff` as the person would run it (renames
    found). Otherwise the listing is kept in a file with no name and the patch
    asked for a batch of paths at a time, in git's order."""
    with tempfile.TemporaryFile() as kept:
        _keep_listing(project, base, branch, kept)
        big = _big_files(project, kept)
        if not big:
            with _git(project, *_patch_args(base, branch, None, renames=True)) as pipe:
                _copy(pipe, write)
            return []
        kept.seek(0)
        for group in _listed_batches(kept):
            sizes(project, group)
            for small in batches([c for c in group if not c.big]):
                with _git(project, *_patch_args(base, branch, small)) as pipe:
                    _copy(pipe, write)
        return big


def _copy(pipe: IO[bytes], write: Callable[[bytes], object]) -> None:
    while chunk := pipe.read(READ_CHUNK):
        write(chunk)


def _keep_listing(project: Path, base: str, branch: str, kept: IO[bytes]) -> None:
    """`git diff --raw -z` into `kept` (a file: a million paths are 150 MB)."""
    args = ("diff", "--raw", "-z", "--no-renames", "--no-abbrev", f"{base}...{branch}")
    with _git(project, *args) as pipe:
        _copy(pipe, kept.write)


def _listed_batches(kept: IO[bytes]) -> Iterator[list[Change]]:
    """The listing kept in `kept`, read back from where it stands, BATCH_FILES at a time."""
    tokens = _tokens(kept)
    batch: list[Change] = []
    for tok in tokens:
        path = next(tokens, b"")
        change = _raw_change(tok, path)
        if change is None:
            continue
        batch.append(change)
        if len(batch) >= BATCH_FILES:
            yield batch
            batch = []
    if batch:
        yield batch


def _big_files(project: Path, kept: IO[bytes]) -> list[Change]:
    """The files of the listing in `kept` over the size cap (the first FILES_MAX),
    their sizes asked of one `cat-file` fed from a file: a million paths cost one
    git, not a thousand (and a Change is made only of a big one)."""
    big: list[Change] = []
    with tempfile.TemporaryFile() as oids:
        kept.seek(0)
        tokens = _tokens(kept)
        for header in tokens:
            next(tokens, b"")
            oids.write(b"\n".join(header.split()[2:4]) + b"\n")
        oids.seek(0)
        kept.seek(0)
        tokens = _tokens(kept)
        with _git(project, "cat-file", "--batch-check", stdin=oids) as pipe:
            lines = _lines(pipe)
            for header in tokens:
                path = next(tokens, b"")
                old, new = _size(next(lines, b"")), _size(next(lines, b""))
                if max(old, new) <= workspace.BIG_BLOB or len(big) >= FILES_MAX:
                    continue
                change = _raw_change(header, path)
                if change is not None:
                    change.old_size, change.new_size = old, new
                    big.append(change)
    return big


def _lines(pipe: IO[bytes]) -> Iterator[bytes]:
    """Lines of git's output, read a chunk at a time (short lines: no cap needed)."""
    rest = b""
    while chunk := pipe.read(READ_CHUNK):
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def _size(line: bytes) -> int:
    """The size in a `cat-file --batch-check` line (0 for a missing object)."""
    parts = line.split()
    return int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else 0
