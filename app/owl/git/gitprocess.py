"""git as a process of Owl's own: started tagged in a session of its own, ended with all it left.

Apart from what git is told (``disarm``) and from the calls that use it
(``safegit``) because what it guards against is the process table, not the
repository: whatever a driver or a hook git was tricked into starting must
not outlive the call. So git starts under a sweeper (``owl.tree.SWEEPER``):
a child subreaper in a session of its own, so whatever git starts stays
beneath it however it hides (`setsid env -i sleep &` from a driver), and is
killed when git exits, when its time is up, or when the daemon dies
(PR_SET_PDEATHSIG). The sweeper is a Python process (some 10 ms, more on a
loaded machine), so the commands that touch refs and objects only
(``disarm.objects_only``), where no driver applies, run without it: git
alone, in a session whose leftovers ``end_leftovers`` ends as before.

Every git carries a tag of its own in its environment (``TAG``), by which
what it left is told from the rest of the machine's processes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import tempfile
from typing import IO

from owl import tree

TAG = "OWL_GIT"
_counter = itertools.count(1)


class GitTimeout(Exception):
    """git ran past its time and its process tree was ended."""


def given_input(
    stdin: bytes | IO[bytes] | None,
) -> contextlib.AbstractContextManager[IO[bytes] | int]:
    """What git reads: `stdin` in a file with no name, or nothing (most calls);
    a file the caller wrote (as large as it likes) is read from where it stands."""
    if stdin is None:
        return contextlib.nullcontext(subprocess.DEVNULL)
    if not isinstance(stdin, bytes):
        return contextlib.nullcontext(stdin)
    given = tempfile.TemporaryFile()
    given.write(stdin)
    given.seek(0)
    return given


def spawn(
    command: list[str],
    env: dict[str, str],
    timeout: float,
    swept: bool = True,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``command`` (git's argv) with ``env`` to its end, or GitTimeout past
    ``timeout`` with its tree ended; under the sweeper unless ``swept`` is False."""
    # What git reads comes from a file with no name (as its output goes to
    # two): nothing else can swap it under git, as it could a named one in
    # a temporary folder that another program of the person's may write.
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        given_input(stdin) as given,
    ):
        popen, tag, mark = launch(command, env, swept, given, out, err)
        try:
            code = popen.wait(timeout)
        except subprocess.TimeoutExpired:
            end_in_time(popen, tag)
            raise GitTimeout(
                f"git {command[4] if len(command) > 4 else ''} ran longer "
                f"than {timeout:g} s and was ended"
            ) from None
        end_leftovers(popen.pid, tag, mark)
        out.seek(0)
        err.seek(0)
        stdout = out.read()
        stderr = err.read()
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def launch(
    command: list[str],
    env: dict[str, str],
    swept: bool,
    stdin: IO[bytes] | int,
    stdout: IO[bytes] | int,
    stderr: IO[bytes],
) -> tuple[subprocess.Popen[bytes], str, int | None]:
    """Start git as Owl's own, in a session of its own, tagged so whatever it
    leaves can be found (under the sweeper unless `swept` is False); the
    Popen, its tag and the pid counter's mark before it (`end_leftovers`)."""
    env[TAG] = tag = f"{os.getpid()}-{next(_counter)}"
    mark = tree.backend.last_pid()
    command_line, child_env = command, env
    if swept:
        command_line, child_env = tree.helper_command(
            tree.SWEEPER, [str(os.getpid()), *command], env
        )
    with tree.SPAWN_LOCK:
        popen = subprocess.Popen(
            command_line,
            env=child_env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
        )
        tree.own(popen, locked=True)
    return popen, tag, mark


def end_in_time(popen: subprocess.Popen[bytes], tag: str) -> None:
    """A git past its time: the sweeper ends its whole tree; should the sweeper
    itself not answer, its tree is ended from here."""
    with contextlib.suppress(ProcessLookupError):
        popen.terminate()
    try:
        popen.wait(5.0)
        return
    except subprocess.TimeoutExpired:
        pass
    with tree.ProcessTree((TAG, tag), popen.pid) as pt:
        pt.kill()
    popen.wait()


def end_leftovers(leader: int, tag: str, mark: int | None) -> None:
    """Kill whatever git started and left behind when it exited.

    Its session (one signal, if anything is left in it), then whatever left
    the session, as a process tree. Only processes started after `mark` are
    read (all of them where the backend cannot tell), and of those the ones
    carrying git's tag, and what they started, are git's. A full sweep of the
    process table after every call would cost a third of a second each on a
    machine running a thousand processes.
    """
    backend = tree.backend
    last = backend.last_pid()
    since = mark if mark is not None and last is not None and last >= mark else None
    rows = backend.snapshot(since)
    # git was reaped before this look, so its pid is free again. A process that
    # has it now is another's (on a machine that forks fast the counter comes
    # round in moments): its session and group are its own, and git's session
    # is empty (a session keeps its leader's number from being handed out).
    reused = leader in rows
    ours = set() if reused else {pid for pid, row in rows.items() if row.sid == leader}
    if ours:
        try:
            os.killpg(leader, signal.SIGKILL)  # the group git led: stopped at once
        except (ProcessLookupError, PermissionError):
            pass
    for pid in rows:
        if pid not in ours and (backend.environ(pid) or {}).get(TAG) == tag:
            ours.add(pid)
    if not ours:
        return
    pt = tree.ProcessTree((TAG, tag))
    for pid in ours:
        pt.add_leader(pid)
    with pt:
        pt.kill()
