"""What reaches an agent's command line fits it, as the kernel bounds it.

Linux refuses `execve` with E2BIG ("Argument list too long") when one argument
is longer than MAX_ARG_STRLEN (32 pages: 128 KiB with its NUL), or when the
arguments and the environment together pass ARG_MAX (a quarter of the stack
limit, 2 MiB by default). A Job's prompt and a reply are each within their own
bound (100 KB), but a later Run's prompt carries the prompt, every reply, the
handoff and the failure note together, which can pass 128 KiB: the agent
would never start.

So a text longer than `TEXT_ROOM` goes by file: it is written to
`.owl/PROMPT.md` in the Job's worktree (beside the handoff, where the agent
reads and writes already), and the argument says where it is, followed by as
much of its beginning as fits. `bounded` is the last look before the spawn:
whatever a template put together, no argument passes the kernel's bound and
the whole stays within ARG_MAX; a text cut there says so. Neither ever refuses:
an agent's command line is never a reason for a blocked Job.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("owl.agents")

MAX_ARG_STRLEN = 32 * 4096  # Linux: one argument, with its NUL
ARG_ROOM = MAX_ARG_STRLEN - 1  # the bytes one argument may have
TEXT_ROOM = 120 * 1024  # a text given as (part of) one argument; leaves room
# for an option such as "--message=" around it
PROMPT_FILE = ".owl/PROMPT.md"
_CUT = "\n[... cut here: longer than a command line may carry]"


def size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def head(text: str, room: int) -> str:
    """The longest beginning of `text` within `room` bytes, cut between characters."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= room:
        return text
    return data[: max(0, room)].decode("utf-8", "ignore")


def by_file(text: str, worktree: Path, room: int = TEXT_ROOM) -> str:
    """`text` itself when it fits `room` bytes; otherwise written whole to
    `.owl/PROMPT.md` in `worktree`, and a note saying where, with as much of its
    beginning as fits. If the file cannot be written (the agent made `.owl` a
    symlink, the disk is full), the text is cut, saying so."""
    if size(text) <= room:
        return text
    path = Path(worktree) / PROMPT_FILE
    try:
        _write(Path(worktree), text)
    except OSError as e:
        log.warning(
            "cannot write %s (%s): the agent's instructions are cut to fit its command line",
            path,
            e,
        )
        return head(text, room - size(_CUT)) + _CUT
    note = (
        f"[Owl: these instructions are {size(text):,} bytes, more than a command line "
        f"carries. All of them are in the file {path}: read it whole before you begin, "
        "and leave it out of your commits. Its beginning follows.]\n\n"
    )
    return note + head(text, room - size(note) - size(_CUT)) + _CUT


def _write(worktree: Path, text: str) -> None:
    """Write `.owl/PROMPT.md` under `worktree` without following a symlink the
    agent may have planted at `.owl` or at the file."""
    flags = getattr(os, "O_CLOEXEC", 0)
    root = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | flags)
    try:
        try:
            os.mkdir(".owl", 0o755, dir_fd=root)
        except FileExistsError:
            pass
        d = os.open(".owl", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | flags, dir_fd=root)
        try:
            fd = os.open(
                "PROMPT.md",
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | flags,
                0o644,
                dir_fd=d,
            )
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8", "surrogateescape"))
        finally:
            os.close(d)
    finally:
        os.close(root)


def arg_max() -> int:
    """The kernel's bound on arguments and environment together."""
    try:
        n = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        n = -1
    return n if n > 0 else 2 * 1024 * 1024


def total(argv: list[str], env: dict[str, str]) -> int:
    """What `execve` counts: every string with its NUL, and a pointer to each."""
    return (
        sum(size(a) + 1 + 8 for a in argv)
        + sum(size(k) + size(v) + 2 + 8 for k, v in env.items())
        + 16
    )


def bounded(argv: list[str], env: dict[str, str]) -> list[str]:
    """`argv` with no argument past the kernel's bound and the whole within
    ARG_MAX (with a margin for what a wrapper adds): the longest arguments (never
    the program's name) are cut until it fits, saying so in them and in the log."""
    out = [a if size(a) <= ARG_ROOM else head(a, ARG_ROOM - size(_CUT)) + _CUT for a in argv]
    budget = arg_max() * 7 // 8
    while total(out, env) > budget and len(out) > 1:
        i = max(range(1, len(out)), key=lambda k: size(out[k]))
        now = size(out[i])
        if now <= 4096:
            break  # the environment itself is too large: nothing here helps
        out[i] = head(out[i], now // 2) + _CUT
    if out != argv:
        log.warning(
            "an agent's command line was cut to what the kernel takes "
            "(%d bytes of arguments and environment)",
            total(out, env),
        )
    return out
