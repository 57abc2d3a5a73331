"""A Run's temporary folder of its own on macOS, where ``/tmp`` is everyone's.

Linux gives a Run a private ``/tmp``; Seatbelt cannot. macOS's ``/private/tmp``
and the per-user folder under ``/private/var/folders`` are read and written by
every program of the person's, so a Run that wrote there could leave a file
their tools later read (a config, a script, a socket), and read what those
tools leave. So the profile refuses both (``seatbelt``), and each Run and each
check gets a folder of its own, as Claude Code's own macOS sandbox gives its
commands one (``/tmp/claude``): ``/private/tmp/owl-UID/JOB.AGENT/RANDOM``,
named by ``TMPDIR`` (and ``TMP``, ``TEMP``, ``TEMPDIR``). The profile allows
``JOB.AGENT`` (the same for each of that Job's Runs, so one profile serves them
all and is compiled once), the only place under either that the Run reads or
writes.

Its path has no space (automake, Bazel and some Makefiles break on one) and is
short: a unix socket's path is at most 104 bytes on macOS, and tools make
theirs in ``TMPDIR`` (tmux, ssh's ControlPath, a test suite's Postgres).

``/private/tmp`` is writable by every account, so ``owl-UID`` is made 0700 or,
when there, opened without following a link and kept only if it is a folder
of this account's that no one else may enter, and ``JOB.AGENT`` likewise
through its descriptor (the Run may write in it, never remove or rename it);
the Run's folder is made in that, fresh (a name never used before), 0700. It is
removed when the command ends, by the helper outside the sandbox that started
it (``seatnet.py``, which removes without following a link the Run left);
one a killed Run left stays until macOS clears ``/tmp`` (at a restart, and
what is unused for three days).
"""

from __future__ import annotations

import os
import re
import secrets
import stat

# Seatbelt's name for /tmp (macOS resolves the link before a rule is matched).
ROOT = "/private/tmp"
TEMP_VARS = ("TMPDIR", "TMP", "TEMP", "TEMPDIR")


class TempProblem(OSError):
    """The Run's temporary folder cannot be made safely, in one line saying why."""


def top(root: str | None = None) -> str:
    """The folder of this account's Runs' temporary folders."""
    return os.path.join(root or ROOT, f"owl-{os.getuid()}")


def make(name: str, root: str | None = None) -> tuple[str, str]:
    """A new empty folder for one Run (or check) of the Job and agent ``name``
    names: (the folder of that Job's and agent's Runs, ``top()/NAME``, which
    the profile allows and so stays the same from one Run to the next; the
    Run's own in it, 0700, a name never used before, its ``TMPDIR``)."""
    where = top(root)
    leaf = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".")[:40] or "run"
    fd = _opened(where)
    try:
        slot = _opened(os.path.join(where, leaf), fd)
    finally:
        os.close(fd)
    try:
        for _ in range(16):
            own = secrets.token_hex(4)
            try:
                os.mkdir(own, 0o700, dir_fd=slot)
            except FileExistsError:
                continue
            return os.path.join(where, leaf), os.path.join(where, leaf, own)
        raise TempProblem(f"{where}/{leaf}: no new folder could be made in it")
    finally:
        os.close(slot)


def _opened(where: str, parent_fd: int | None = None) -> int:
    """``where`` opened as a folder (through ``parent_fd`` when given), made
    0700 if missing; refused unless it is a folder, not a link, of this
    account's that no other may enter."""
    parent, leaf = os.path.split(where)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        pfd = os.open(parent, flags) if parent_fd is None else parent_fd
    except OSError as e:
        raise TempProblem(f"{parent}: {e.strerror}") from None
    try:
        try:
            os.mkdir(leaf, 0o700, dir_fd=pfd)
        except FileExistsError:
            pass
        fd = os.open(leaf, flags | os.O_NOFOLLOW, dir_fd=pfd)
    except OSError as e:
        raise TempProblem(f"{where}: {e.strerror} (not a folder: remove it)") from None
    finally:
        if parent_fd is None:
            os.close(pfd)
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise TempProblem(
            f"{where} belongs to uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}; "
            "a Run's temporary folder needs it this account's alone (0700): remove it"
        )
    return fd


def env_with(env_set: tuple[tuple[str, str], ...], folder: str) -> tuple[tuple[str, str], ...]:
    """The Policy's variables with every temporary-folder one naming ``folder``."""
    kept = [(k, v) for k, v in env_set if k not in TEMP_VARS]
    return (*kept, *((name, folder) for name in TEMP_VARS))
