"""Everything the review page shows about one Job, gathered from the store and git.

Read-only: a read-only Store and git commands that only read (log, diff,
status). Every git call goes through `owl.git.workspace.git`. A project that moved
or a branch that is gone still gives a page: what git cannot answer is left
out and said so.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from owl.engine import checks as checksmod
from owl.git import workspace
from owl.review import changes
from owl.review import text as textmod
from owl.rules.attempts import attempt_numbers  # counted as everywhere: interrupted is none
from owl.store.db import Store

DIFF_MAX_CHARS = 500_000  # the page's diff is cut here, at a file boundary if one is near
COMMITS_MAX = 200
LOG_READ_MAX = 4 << 20  # the last message is in the log's tail
GIT_READ_MAX = 1 << 20  # of the commits' log, and of the worktree's status
DIRTY_SHOWN = 100


def _git(repo: Path, *args: str) -> str | None:
    try:
        proc = workspace.git(repo, *args, check=False)
    except (OSError, subprocess.SubprocessError, workspace.WorkspaceError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _git_head(repo: Path, *args: str, limit: int = GIT_READ_MAX) -> str | None:
    """git's output, its first `limit` bytes only (a commit message or an untracked
    listing can be as large as an agent makes it)."""
    try:
        with workspace.git_stream(repo, *args) as s:
            data = s.stdout.read(limit)
    except (OSError, workspace.WorkspaceError):
        return None
    if s.returncode != 0 and not s.closed_early:
        return None
    return data.decode("utf-8", "replace")


def read_tail(path: str | None, limit: int = LOG_READ_MAX) -> str:
    """The last `limit` bytes of a file as text ('' when it cannot be read)."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def run_facts(store: Store, run: dict[str, Any]) -> dict[str, Any]:
    """One Run: how it ended, how long it took, its usage, its last message, its checks."""
    log_text = None
    message = run.get("last_message")
    if not message:
        log_text = read_tail(run.get("log"))
        message = textmod.last_message(log_text)
    usage = textmod.parse_usage(run.get("usage"))
    if usage is None:
        log_text = read_tail(run.get("log")) if log_text is None else log_text
        usage = textmod.usage_from_log(log_text)
    ended = run.get("ended_at")
    started = run.get("started_at")
    return {
        "id": run["id"],
        "attempt": run["attempt"],
        "state": run["state"],
        "agent": run.get("agent"),
        "contained": run.get("contained"),
        "outcome": run.get("outcome"),
        "ended_by": run.get("ended_by"),
        "reason": run.get("reason"),
        "exit_code": run.get("exit_code"),
        "started_at": started,
        "ended_at": ended,
        "duration_s": (ended - started) if ended and started else None,
        "log": run.get("log"),
        "last_message": message,
        "usage": usage,
        "outside": textmod.parse_list(run.get("outside")),
        "checks": [checksmod.view(c) for c in store.checks(run["id"])],
    }


def commits(project: Path, base: str, branch: str) -> list[dict[str, Any]]:
    out = _git_head(
        project,
        "log",
        f"-{COMMITS_MAX}",
        "--no-color",
        "--format=%H%x1f%h%x1f%an%x1f%at%x1f%s%x1f%b%x1e",
        f"{base}..{branch}",
    )
    result = []
    for rec in (out or "").split("\x1e"):
        parts = rec.strip("\n").split("\x1f")
        if len(parts) < 6:
            continue
        full, short, author, when, subject, body = parts[:6]
        result.append(
            {
                "hash": full,
                "short": short,
                "author": author,
                "at": float(when) if when.isdigit() else None,
                "subject": subject,
                "body": body.strip(),
            }
        )
    return result


def file_view(c: changes.Change) -> dict[str, Any]:
    """One changed file as the page and `owl jobs show` list it: its line counts
    (None for binary, or a file too big to read) and its size."""
    return {
        "path": c.path,
        "added": c.added,
        "removed": c.removed,
        "size": c.size,
        "big": c.big,
        "note": f"{changes.size_words(c.size)}, not shown" if c.big else None,
    }


def files(project: Path, base: str, branch: str) -> list[dict[str, Any]]:
    """The first `changes.FILES_MAX` files changed ([] when git cannot say)."""
    try:
        return [file_view(c) for c in changes.listing(project, base, branch).files]
    except changes.ChangesError:
        return []


def cap(diff: str, limit: int = DIFF_MAX_CHARS) -> tuple[str, bool]:
    """The diff cut to about `limit` characters: at the last file boundary before the
    limit when there is one in its second half, else at a line end."""
    if len(diff) <= limit:
        return diff, False
    cut = diff.rfind("\ndiff --git ", 0, limit)
    if cut < limit // 2:
        cut = diff.rfind("\n", 0, limit)
    return diff[: max(cut, 0) + 1], True


def gather(store: Store, job_id: int, *, diff_limit: int = DIFF_MAX_CHARS) -> dict[str, Any]:
    """The page's facts for a Job, or LookupError when there is no such Job."""
    job = store.job(job_id)
    if job is None:
        raise LookupError(f"no job {job_id}")
    runs = [run_facts(store, r) for r in store.runs(job_id)]
    for r, n in zip(runs, attempt_numbers(runs)):
        r["attempt"] = n
    facts: dict[str, Any] = {
        "job": {
            k: job.get(k)
            for k in (
                "id",
                "title",
                "prompt",
                "state",
                "project",
                "agent",
                "branch",
                "base",
                "worktree",
                "reason",
                "attempts",
                "attempts_left",
                "created_at",
                "base_branch",
            )
        },
        "runs": runs,
        "verify": [checksmod.view(c) for c in store.verification(job_id)],
        "replies": list(store.replies(job_id)) if hasattr(store, "replies") else [],
        "commits": [],
        "files": [],
        "files_total": 0,
        "lines": (0, 0),
        "diff": "",
        "diff_chars": 0,
        "diff_more": False,
        "diff_cut": False,
        "git_problem": None,
        "worktree_dirty": None,
        "generated_at": time.time(),
    }
    message = next((r["last_message"] for r in reversed(runs) if r["last_message"]), None)
    facts["last_message"] = message
    project, base, branch = Path(job["project"]), job["base"], job["branch"]
    if not (branch and base):
        facts["git_problem"] = "no branch yet: the Job has not run"
        return facts
    if not project.is_dir():
        facts["git_problem"] = f"the project {project} is not there any more"
        return facts
    if _git(project, "rev-parse", "--verify", "-q", f"refs/heads/{branch}") is None:
        facts["git_problem"] = f"the branch {branch} is not in {project} any more"
        return facts
    facts["commits"] = commits(project, base, branch)
    try:
        _changes(facts, project, base, branch, diff_limit)
    except changes.ChangesError as e:
        facts["git_problem"] = f"git cannot read the branch {branch}: {e}"
    worktree = job.get("worktree")
    if worktree and Path(worktree).is_dir():
        status = _git_head(Path(worktree), "status", "--porcelain")
        facts["worktree_dirty"] = [
            line[3:]
            for line in (status or "").split("\n")[:-1]  # the last is '' or cut short
            if line[3:] and not line[3:].startswith(".owl/")
        ][:DIRTY_SHOWN]
    return facts


def _changes(facts: dict[str, Any], project: Path, base: str, branch: str, limit: int) -> None:
    """The files, line counts and diff of the branch, each read within its cap
    (`owl.review.changes`): what a commit of any size costs to show."""
    listed = changes.listing(project, base, branch)
    facts["files"] = [file_view(c) for c in listed.files]
    facts["files_total"] = listed.total
    facts["lines"] = (listed.added, listed.removed)
    facts["lines_of"] = None if listed.counted_all else len(listed.files)
    diff, more = changes.patch_text(project, base, branch, listed, limit)
    facts["diff_chars"] = len(diff.encode("utf-8", "replace"))  # what git wrote, so far
    facts["diff_more"] = more
    # git had more: cut what was read at a file boundary (its bytes, not its
    # characters, were counted against the limit)
    facts["diff"], cut = cap(diff, min(limit, len(diff) - 1) if more else limit)
    facts["diff_cut"] = cut or more
