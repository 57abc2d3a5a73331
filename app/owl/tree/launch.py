"""Starting an agent, and reaping the orphans it leaves behind.

Both live here because they share one lock. A child subreaper inherits every
orphan of its descendants as a zombie it must reap; a blanket
``os.waitpid(-1)`` would also take the exit status that ``subprocess`` is
waiting for, and ``Popen`` would then report 0 for an agent that failed.
So orphans are reaped one by one, only those nobody owns, and never while a
spawn is half done (a Popen whose pid its owner has not yet recorded).
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any

from . import _platform, pyhelper

SPAWN_LOCK = threading.Lock()

# Every Popen started by spawn() whose exit status has not been collected:
# reap_orphans leaves these alone even before the caller records them.
_spawned: dict[int, subprocess.Popen[Any]] = {}


def _resolve(program: str, env: dict[str, str], cwd: str) -> str:
    """The absolute path of the program argv[0] names, as the child would
    find it (the child's PATH, relative paths from the child's cwd)."""
    if not program:
        raise FileNotFoundError("no agent program given (empty command)")
    if os.sep in program:
        path = os.path.join(cwd, program)  # join keeps an absolute path
        if not os.path.exists(path):
            raise FileNotFoundError(f"agent program not found: {path}")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(f"agent program is not executable: {path}")
        return os.path.abspath(path)
    search = env.get("PATH", os.defpath)
    found = shutil.which(program, path=search)
    if found is not None:
        return os.path.abspath(found)
    for folder in search.split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.path.isfile(candidate):
            raise PermissionError(f"agent program is not executable: {candidate}")
    raise FileNotFoundError(f"agent program {program!r} not found on PATH ({search})")


REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")


class Reaped:
    """An agent started under a reaper of its own (see ``reaper.py``).

    Looks like the Popen it wraps where the engine needs it (``pid``,
    ``returncode`` and ``poll`` are the reaper's, so the orphan reaping rules
    are unchanged), but ``wait`` returns the *agent's* exit status as soon
    as the agent exits, while the reaper stays on until the last process it
    holds is gone.
    """

    def __init__(self, popen: subprocess.Popen[Any], report_fd: int) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.reaper_pid = popen.pid
        self._fd: int | None = report_fd
        self._said = b""
        self._code: int | None = None
        self._lock = threading.Lock()

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        """The agent's exit status; TimeoutExpired as Popen.wait does."""
        with self._lock:
            if self._code is not None:
                return self._code
            while self._fd is not None:
                ready, _, _ = select.select([self._fd], [], [], timeout)
                if not ready:
                    raise subprocess.TimeoutExpired(self.popen.args, timeout or 0)
                chunk = os.read(self._fd, 64)
                self._said += chunk
                if not chunk or b"\n" in self._said:
                    os.close(self._fd)
                    self._fd = None
            word = self._said.split(b"\n", 1)[0]
            if word.startswith(b"exit "):
                self._code = int(word[5:])
            else:
                # The reaper died before the agent did (killed): its status it is.
                self._code = self.popen.wait(timeout)
            return self._code

    def __del__(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass


def spawn(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdout: Any,
    stderr: Any,
    nice: int = 10,
    stdin: Any = subprocess.DEVNULL,
    reaper: bool = False,
    cgroup: Any = None,
    also: Sequence[str] = (),
) -> Any:
    """Start ``argv`` in a new session at low priority, never through a shell.

    The program runs at niceness ``nice`` and (Linux) in the idle I/O class,
    and so does everything it starts: the priority is set by exec'ing
    through ``nice``/``ionice`` (macOS: ``taskpolicy``), before the
    program's first instruction, instead of a ``preexec_fn`` that is unsafe
    in a threaded process. The program sees its resolved absolute path as
    argv[0].

    With ``reaper``, the program starts under a reaper of its own that is
    a child subreaper (``reaper.py``), so whatever it leaves behind stays in
    its tree; the result is then a ``Reaped``, whose ``wait`` is the
    program's own exit status; with ``cgroup`` too (a ``RunGroup``), the
    reaper joins that cgroup before the program starts, and the cgroups
    named in ``also`` (the v1 ones of the Run's caps, ``cgroup_caps.py``).

    Raises FileNotFoundError or PermissionError, with a message a person
    can act on, if the program or the working directory cannot be used.
    """
    if not os.path.isdir(cwd):
        raise FileNotFoundError(f"working directory does not exist: {cwd}")
    program = _resolve(argv[0] if argv else "", env, cwd)
    command = [program, *argv[1:]]
    rfd = wfd = -1
    if reaper:
        rfd, wfd = os.pipe()
        joined = [str(cgroup.path)] if cgroup is not None else []
        where = os.pathsep.join([*joined, *(a for a in also if os.pathsep not in a)]) or "-"
        command, env = pyhelper.command(REAPER, [str(wfd), where, *command], env)
    command = _platform.backend.priority_prefix(nice) + command
    try:
        with SPAWN_LOCK:
            popen = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                close_fds=True,
                pass_fds=(wfd,) if reaper else (),
            )
            _spawned[popen.pid] = popen
    except BaseException:
        if reaper:
            os.close(rfd)
        raise
    finally:
        if reaper:
            os.close(wfd)
    return Reaped(popen, rfd) if reaper else popen


def own(popen: subprocess.Popen[Any], *, locked: bool = False) -> None:
    """Leave this Popen's exit status to it: reap_orphans will not reap its
    pid until its returncode is known.

    For children started outside spawn() in a session of their own (a
    plain ``subprocess`` call in ours needs nothing). Start the child under
    SPAWN_LOCK and pass `locked=True` so no reap can come in between.
    """
    if locked:
        _spawned[popen.pid] = popen
        return
    with SPAWN_LOCK:
        _spawned[popen.pid] = popen


def become_subreaper() -> bool:
    """Linux: prctl(PR_SET_CHILD_SUBREAPER) via ctypes; False elsewhere.

    Afterwards orphans of our descendants are re-parented to this process,
    where sweeps find them and reap_orphans must reap them.
    """
    ok = bool(_platform.backend.become_subreaper())
    if ok:
        _platform.adopting = True
    return ok


def reap_orphans(owned: Callable[[int], bool]) -> list[int]:
    """Reap zombie children of this process that no Popen owns; returns
    their pids.

    A zombie child is left alone if ``owned(pid)`` is True, if spawn()
    started it and its status has not been collected, or if it is in this
    process's own session (started by a plain ``subprocess`` call, which
    will wait for it; an adopted orphan of a Run never is, since every Run
    starts in a session of its own). ``owned`` is called under SPAWN_LOCK
    and must not spawn.
    """
    if not hasattr(os, "waitid"):
        return []
    with SPAWN_LOCK:
        for pid, popen in list(_spawned.items()):
            # poll() collects the status for its own Popen (never stealing it):
            # an owned child nobody waits for (the watchdog) is not left a zombie.
            if popen.poll() is not None:
                del _spawned[pid]
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        try:
            # Cheap test first: is any child waiting to be reaped at all?
            if os.waitid(os.P_ALL, 0, flags) is None:
                return []
        except ChildProcessError:
            return []
        own_session = os.getsid(0)
        reaped = []
        for pid, sid in _platform.backend.zombie_children(os.getpid()):
            if pid in _spawned or sid == own_session or owned(pid):
                continue
            try:
                # Peek without reaping: is this still our exited child?
                if os.waitid(os.P_PID, pid, flags) is None:
                    continue
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            reaped.append(pid)
        return reaped
