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
from pathlib import Path
from typing import TextIO

from owl.git import workspace
from owl.errors import Refused, StoreError
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


def diff_text(job: dict) -> str:
    """The Job's branch against the commit it started from, as git prints it."""
    if not (job["branch"] and job["base"]):
        raise Refused(f"job {job['id']} has no branch yet (it has not run)")
    project = Path(job["project"])
    if not project.is_dir():
        raise Refused(f"the project {project} is not there any more")
    try:
        proc = workspace.git(
            project,
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            f"{job['base']}...refs/heads/{job['branch']}",
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise Refused(f"git diff cannot be run: {e}") from None
    if proc.returncode != 0:
        raise Refused(
            f"the branch {job['branch']} cannot be read in {project}: "
            f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        )
    return proc.stdout


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


def diff(paths: object, job_id: int, *, out: TextIO = sys.stdout) -> int:
    text = diff_text(_job(paths, job_id))
    if not text:
        print(f"job {job_id}'s branch changes nothing", file=sys.stderr)
        return 0
    if not out.isatty():
        out.write(text)
        out.flush()
        return 0
    shown = colour(text)
    pager = _pager()
    if pager is None:
        out.write(shown)
        return 0
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    proc = subprocess.Popen(pager, stdin=subprocess.PIPE, env=env)
    try:
        assert proc.stdin is not None
        proc.stdin.write(shown.encode("utf-8", "replace"))
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the person quit the pager early
    proc.wait()
    return 0
