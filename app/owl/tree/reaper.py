"""The small reaper every Run's agent starts under (run as a script, not imported).

    python -I -S reaper.py REPORT_FD CGROUP PROGRAM [ARGS...]

Why: a process that sheds the Run's tag (``env -i``) and double-forks away
from its parent (``( setsid cmd & )``) is re-parented to the nearest child
subreaper. With this one in every Run, that is the Run's own reaper: the
orphan stays inside the Run's tree, where every sweep finds it by parentage
alone, needing no tag and no memory of having seen it.

CGROUP is the Run's cgroup directory (see ``cgroup.py``), or ``-``: the
reaper moves itself into it first, so the agent and all it starts are born
there. Several (a v2 cgroup and the v1 ones of its caps, ``cgroup_caps.py``)
are joined by ``os.pathsep``. It sets PR_SET_CHILD_SUBREAPER (Linux; elsewhere it is a plain parent),
forks the agent (in a session of its own, with the signals it inherited
back at their defaults), and
reaps every child. When the agent itself exits, its status is written to
REPORT_FD as one line (``exit N``, N negative for a signal, as subprocess
reports it) and the fd is closed: the daemon learns at once that the agent
is done, while the reaper stays until the last process under it is gone,
so nothing left behind escapes the Run. It ignores SIGTERM (the daemon ends
the Run's processes one by one, and SIGKILL still ends the reaper). Its own
exit status is the agent's.

Standard library only, started with ``-I -S`` so it costs a few ms.
"""

import ctypes
import os
import signal
import sys

_PR_SET_CHILD_SUBREAPER = 36
# Signals the daemon may ignore or handle that the agent must see as usual.
_RESET = ("SIGTERM", "SIGINT", "SIGHUP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGPIPE", "SIGQUIT")


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _status(raw: int) -> int:
    if os.WIFSIGNALED(raw):
        return -os.WTERMSIG(raw)
    return os.WEXITSTATUS(raw)


def _report(fd: int, code: int) -> None:
    try:
        os.write(fd, f"exit {code}\n".encode())
        os.close(fd)
    except OSError:
        pass


def _join(cgroups: str) -> None:
    for cgroup in cgroups.split(os.pathsep):
        if cgroup in ("-", ""):
            continue
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
        except OSError as e:
            os.write(2, f"owl: the Run's cgroup could not be joined: {e}\n".encode())


def main(argv: list[str]) -> int:
    fd, cgroup, program, args = int(argv[0]), argv[1], argv[2], argv[2:]
    _join(cgroup)
    _become_subreaper()
    os.set_inheritable(fd, False)
    agent = os.fork()
    if agent == 0:
        os.setsid()  # the agent leads a session of its own, as without us
        for name in _RESET:
            sig = getattr(signal, name, None)
            if sig is not None:
                signal.signal(sig, signal.SIG_DFL)
        try:
            os.execv(program, args)
        except OSError as e:
            os.write(2, f"owl: cannot start {program}: {e}\n".encode())
        os._exit(127)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = None
    while True:
        try:
            pid, raw = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if pid == agent:
            code = _status(raw)
            _report(fd, code)
    if code is None:  # pragma: no cover - the agent is always our child
        return 127
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
