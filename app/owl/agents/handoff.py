"""The handoff between Runs, and the prompt each Run is given.

A Run can be stopped at any moment, so what one Run learned reaches the next
only through the branch (its commits) and `.owl/HANDOFF.md` in the worktree,
which the agent is asked to keep current. The next Run's prompt quotes both.

The worktree is written by an agent Owl does not trust, so the handoff is read
defensively: with a size cap, never through a symlink (a `.owl` or
`HANDOFF.md` pointing at `~/.ssh/id_ed25519` must not be quoted into a prompt
sent to a remote model), and never blocking on a FIFO.
"""

from __future__ import annotations

import codecs
import logging
import os
import stat
from pathlib import Path

from owl.agents.base import RunContext

log = logging.getLogger(__name__)

HANDOFF_DIR = ".owl"
HANDOFF_NAME = "HANDOFF.md"
HANDOFF_PATH = f"{HANDOFF_DIR}/{HANDOFF_NAME}"

# Flags for every open on the way to the handoff: O_NOFOLLOW refuses a
# symlink as the last component; O_NONBLOCK keeps a FIFO from hanging us.
_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_handoff(worktree: Path, limit: int = 64_000) -> str | None:
    """The text of `.owl/HANDOFF.md` in `worktree`, at most `limit` bytes of it.

    Returns None when there is no handoff, when it is empty, or when it is
    refused: `.owl` or `HANDOFF.md` is a symlink, or not a directory / regular
    file. A longer file is cut at `limit` bytes and says so at its end.
    """
    try:
        root = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        try:
            d = os.open(HANDOFF_DIR, _NOFOLLOW | os.O_DIRECTORY, dir_fd=root)
        except FileNotFoundError:
            return None
        except OSError as e:
            # ELOOP (a symlink) or ENOTDIR (a file, or a symlink on some systems).
            log.warning("not reading %s/%s: %s", worktree, HANDOFF_DIR, e.strerror)
            return None
        try:
            try:
                fd = os.open(HANDOFF_NAME, _NOFOLLOW, dir_fd=d)
            except FileNotFoundError:
                return None
            except OSError as e:
                log.warning("not reading %s/%s: %s", worktree, HANDOFF_PATH, e.strerror)
                return None
        finally:
            os.close(d)
    finally:
        os.close(root)
    # Checked on the open file, not the path, so it cannot change in between.
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        log.warning("not reading %s/%s: not a regular file", worktree, HANDOFF_PATH)
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    cut = len(data) > limit
    # An incremental decoder with final=False drops a multi-byte character
    # split by the cap instead of turning it into a replacement mark.
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(
        data[:limit], final=not cut
    )
    if not text.strip():
        return None
    if cut:
        text = (
            text.rstrip("\n") + f"\n[... cut here: {HANDOFF_PATH} is longer than {limit} bytes]\n"
        )
    return text


def branch_log(worktree: Path, base: str, limit: int = 50) -> str:
    """`git log --oneline base..HEAD` in `worktree`, newest first, at most `limit` lines.

    Returns "" when the branch has no commits of its own, or when git cannot
    answer (the prompt then says there are none, and the agent looks itself).
    """
    if not base or base.startswith("-"):
        raise ValueError(f"not a commit: {base!r}")
    from owl.git.workspace import WorkspaceError, git

    try:
        out = git(
            worktree,
            "log",
            "--oneline",
            "--no-decorate",
            "--no-color",
            f"--max-count={int(limit)}",
            "--end-of-options",
            f"{base}..HEAD",
            check=False,
            timeout=30,
        )
    except (OSError, WorkspaceError) as e:
        log.warning("git log in %s failed: %s", worktree, e)
        return ""
    if out.returncode != 0:
        log.warning("git log in %s failed: %s", worktree, out.stderr.strip())
        return ""
    return out.stdout.strip()


def contract(ctx: RunContext) -> str:
    """The rules of an unattended Run, stated to the agent.

    The claude driver also sends this as system prompt text; agents without a
    system prompt get it at the end of their prompt (see `build_prompt`).
    """
    return (
        "You are running unattended, started by Owl while the person is away from "
        "their computer. No human will answer questions or approve anything: never "
        "wait for input; make reasonable decisions yourself and note them.\n"
        f"- Work only in {ctx.worktree}, on branch {ctx.branch}. Do not switch "
        "branches, rewrite history that is already committed, or push.\n"
        "- Commit early and often, with clear messages. Work that is not committed "
        "may be lost.\n"
        f"- Keep {HANDOFF_PATH} current: what is done, what is next, and anything "
        "the next attempt must know (decisions, dead ends, how to run the tests). "
        "It is read from this worktree when the next run starts.\n"
        "- This run may be stopped at any moment, without warning. A later run "
        "will see only this branch and the handoff, so keep both up to date as "
        "you go rather than at the end.\n"
        "- When the task is complete, commit, update the handoff to say so, and stop."
    )


def person_words(ctx: RunContext) -> str:
    """What the person said, and nothing of Owl's: the Job's prompt, then each of
    their replies (oldest first). A command agent's `{prompt}`, so an agent that
    uses its argument as a commit message or a file name gets their words only."""
    replies = [r.strip() for r in ctx.replies if r.strip()]
    if not replies:
        return ctx.job_prompt
    return "\n\n".join([ctx.job_prompt.rstrip("\n")] + replies)


def earlier_runs(ctx: RunContext, with_replies: bool = True) -> list[str]:
    """What earlier Runs left, as paragraphs: the attempt, why the last one failed,
    the person's replies (`with_replies`), the handoff (or a note that none was
    written) and the branch's commits. Empty for the first Run."""
    earlier = ctx.attempt - 1 if ctx.earlier is None else ctx.earlier
    if earlier <= 0 and ctx.attempt <= 1:
        return []
    # the attempt as the person counts it; the run too when they differ (a Run
    # stopped, or one the person replied to, spent no attempt)
    run = f", run {earlier + 1}" if earlier + 1 != ctx.attempt else ""
    parts = [
        f"--- Attempt {ctx.attempt}{run} ---\n"
        f"Earlier runs already worked on this task on branch {ctx.branch}. "
        "Continue from where they stopped; do not start over."
    ]
    if ctx.failure_note:
        parts.append("Why the previous run failed:\n" + ctx.failure_note.strip())
    if with_replies and ctx.replies:
        parts.append(
            "The person looked at the work and replied (oldest first):\n\n"
            + "\n\n".join(r.strip() for r in ctx.replies)
        )
    handoff = read_handoff(Path(ctx.worktree))
    if handoff is None:
        parts.append(
            f"No handoff was written ({HANDOFF_PATH} is missing or empty). Look at "
            "the commits below and the worktree to see where things stand."
        )
    else:
        parts.append(
            f"Handoff left by the previous run ({HANDOFF_PATH}):\n"
            f"----- begin {HANDOFF_PATH} -----\n{handoff.rstrip(chr(10))}\n"
            f"----- end {HANDOFF_PATH} -----"
        )
    commits = ctx.commits if ctx.commits is not None else branch_log(Path(ctx.worktree), ctx.base)
    parts.append(
        f"Commits on {ctx.branch} so far (git log --oneline {ctx.base[:12]}..HEAD):\n"
        + (commits if commits else "(none yet)")
    )
    return parts


def instructions(ctx: RunContext) -> str:
    """Owl's own text for this Run, without the person's words: what earlier Runs
    left, then the rules of an unattended Run. A command agent's `{instructions}`."""
    return (
        "\n\n".join(
            earlier_runs(ctx, with_replies=False) + ["--- How this run works ---\n" + contract(ctx)]
        )
        + "\n"
    )


def build_prompt(ctx: RunContext, with_contract: bool = True) -> str:
    """The whole prompt for this Run, for an agent that takes one text (claude).

    The first Run gets the Job's prompt and the contract. Every later Run also
    gets what the previous Runs left (`earlier_runs`).
    `with_contract=False` leaves the contract out, for an agent that is given
    it as system prompt instead (claude), so it is not said twice.
    """
    parts = [ctx.job_prompt.rstrip("\n")] + earlier_runs(ctx)
    if with_contract:
        parts.append("--- How this run works ---\n" + contract(ctx))
    return "\n\n".join(parts) + "\n"
