"""`owl jobs review` and `owl jobs diff`: the CLI's side of coming back to a Job.

Both read the database (read-only) and git themselves, so they answer with or
without a daemon and never hold up the supervisor. `diff` prints the patch
exactly as git gives it when its output is a file or a pipe (so it can be
applied), and through the pager in colour on a terminal, with any control
characters the agent wrote shown rather than obeyed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, TextIO

from owl.errors import Refused, StoreError
from owl.git.workspace import BIG_BLOB
from owl.review import changes
from owl.review.text import visible

_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}
_HEADERS = (
    "diff --git ",
    "index ",
    "--- ",
    "+++ ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity",
    "rename ",
    "Binary files",
)
_RESET = "\x1b[0m"


def open_in_browser(path: Path) -> None:
    """Hand a file to the desktop's opener, detached: Owl does not wait for the browser."""
    opener = "open" if sys.platform == "darwin" else "xdg-open"
    if shutil.which(opener) is None:
        raise Refused(f"{opener} is not installed; open {path} yourself")
    subprocess.Popen(
        [opener, str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def review(paths: object, job_id: int, *, open_it: bool, out: TextIO = sys.stdout) -> int:
    from owl.review import write_page

    page = write_page(paths, job_id)
    if open_it:
        open_in_browser(page)
    print(page, file=out)
    return 0


def _job(paths: object, job_id: int) -> dict:
    from owl.store.db import Store

    try:
        store = Store(paths.db, readonly=True)  # type: ignore[attr-defined]
    except StoreError as e:
        raise Refused(str(e)) from None
    try:
        job = store.job(job_id)
    finally:
        store.close()
    if job is None:
        raise Refused(f"no job {job_id}")
    return job


def _where(job: dict) -> Path:
    """The Job's project, or Refused saying why its diff cannot be read."""
    if not (job["branch"] and job["base"]):
        raise Refused(f"job {job['id']} has no branch yet (it has not run)")
    project = Path(job["project"])
    if not project.is_dir():
        raise Refused(f"the project {project} is not there any more")
    return project


def write_diff(job: dict, write: Callable[[bytes], object]) -> list[changes.Change]:
    """The Job's branch against the commit it started from, as git prints it,
    handed to `write` a chunk at a time (never held whole: `owl.review.changes`);
    the files left out for their size.

    git writes into a file with no name first, as every git of Owl's does: a
    reader that takes its time (a pager, `| less`) must not hold git past its
    time limit."""
    project = _where(job)
    with tempfile.TemporaryFile() as kept:
        try:
            big = changes.write_patch(
                project, job["base"], f"refs/heads/{job['branch']}", kept.write
            )
        except changes.ChangesError as e:
            raise Refused(f"the branch {job['branch']} cannot be read in {project}: {e}") from None
        kept.seek(0)
        while chunk := kept.read(changes.READ_CHUNK):
            write(chunk)
    return big


class _Lines:
    """Bytes in, whole lines out: the terminal's colours are given a line at a time."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.rest = b""

    def write(self, data: bytes) -> None:
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            self.emit(line.decode("utf-8", "replace") + "\n")

    def close(self) -> None:
        if self.rest:
            self.emit(self.rest.decode("utf-8", "replace"))
            self.rest = b""


def colour(diff: str) -> str:
    """The diff for a terminal: each line's control characters made visible, then coloured."""
    lines = []
    for line in diff.split("\n"):
        shown = visible(line)
        if line.startswith(_HEADERS):
            lines.append(f"\x1b[1m{shown}{_RESET}")
        elif line[:1] in _COLOURS:
            lines.append(f"{_COLOURS[line[:1]]}{shown}{_RESET}")
        else:
            lines.append(shown)
    return "\n".join(lines)


def _pager() -> list[str] | None:
    cmd = os.environ.get("GIT_PAGER") or os.environ.get("PAGER") or "less"
    argv = shlex.split(cmd)
    if not argv or argv[0] == "cat" or shutil.which(argv[0]) is None:
        return None
    return argv


def _left_out(big: list[changes.Change]) -> list[str]:
    limit = changes.size_words(BIG_BLOB)
    return [f"{changes.summary(c)} (over {limit})" for c in big]


def diff(paths: object, job_id: int, *, out: TextIO = sys.stdout) -> int:
    job = _job(paths, job_id)
    if not out.isatty():
        return _diff_plain(job, out)
    with _Pager(out) as pager:
        lines = _Lines(lambda line: pager.write(colour(line)))
        big = write_diff(job, lines.write)
        lines.close()
        for line in _left_out(big):
            pager.write(f"\x1b[1m{visible(line)}{_RESET}\n")
    if not pager.started:
        print(f"job {job_id}'s branch changes nothing", file=sys.stderr)
    return 0


def _diff_plain(job: dict, out: TextIO) -> int:
    """Into a file or a pipe: the patch byte for byte, so it can be applied; what
    was left out for its size is said on stderr, not in the patch."""
    out.flush()
    written = 0

    def write(data: bytes) -> None:
        nonlocal written
        written += len(data)
        target = getattr(out, "buffer", None)
        if target is not None:
            target.write(data)
        else:
            out.write(data.decode("utf-8", "replace"))

    big = write_diff(job, write)
    out.flush()
    for line in _left_out(big):
        print(f"owl: {visible(line, keep_newlines=False)}", file=sys.stderr)
    if not written and not big:
        print(f"job {job['id']}'s branch changes nothing", file=sys.stderr)
    return 0


class _Pager:
    """The person's pager, started at the first line to show (none for an empty
    diff), or the terminal itself when there is none."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = False
        self.proc: subprocess.Popen[bytes] | None = None
        self.broken = False

    def write(self, text: str) -> None:
        if not self.started:
            self.started = True
            argv = _pager()
            if argv is not None:
                env = dict(os.environ)
                env.setdefault("LESS", "FRX")
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
        if self.broken:
            return
        if self.proc is None:
            self.out.write(text)
            return
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(text.encode("utf-8", "replace"))
        except BrokenPipeError:
            self.broken = True  # the person quit the pager early

    def __enter__(self) -> "_Pager":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.proc.wait()
