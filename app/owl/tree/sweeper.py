"""A reaper that ends everything under it when its program ends (run as a script).

    python -I -S sweeper.py PARENT PROGRAM [ARGS...]

Why: a short command Owl runs itself (git) may start something that sheds
every mark (``setsid env -i sleep 1000 &``, from a filter driver): it leaves
git's session, loses git's tag, and once its parent exits it is re-parented
to the nearest child subreaper, which would be the daemon, where no sweep of
git's tree finds it. Under this sweeper it is re-parented here instead, so
the sweeper's descendants are exactly what the program started, however they
hid. When the program exits, the sweeper kills every descendant (SIGKILL,
round after round, since one killed mid-fork leaves its child to us), then
exits with the program's status (128+N for a signal, as a shell says it).

It ends the same way, at once, on SIGTERM, and when its parent thread dies
(PR_SET_PDEATHSIG: the daemon killed with SIGKILL takes its git with it).
PARENT is the pid that started it: if that is already gone before the
death signal was armed, it ends straight away.

Linux only in full (a subreaper and the death signal need prctl); elsewhere
it is a plain parent that kills the program's process group on the way out.
Standard library only, started with ``-I -S`` so it costs a few ms.
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 200


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _descendants() -> list[int]:
    """Every process under this one, read from /proc (Linux); [] elsewhere."""
    me = os.getpid()
    parent_of: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        parent_of[int(name)] = int(fields[1])
    out = []
    for pid in parent_of:
        seen = 0
        up = parent_of.get(pid)
        while up is not None and seen < 4096:
            if up == me:
                out.append(pid)
                break
            up = parent_of.get(up)
            seen += 1
    return out


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _no_children() -> bool:
    """No child at all, hence (a subreaper's) no descendant: the usual case, cheap."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return False


def sweep() -> None:
    """Kill every descendant until none is left (or the rounds run out)."""
    for _ in range(_ROUNDS):
        _reap()
        if _no_children():
            return
        found = _descendants()
        _reap()
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()


def _end(child: int, code: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if child > 0:
        try:
            os.killpg(child, signal.SIGKILL)  # the program's group: all there is elsewhere
        except OSError:
            pass
    sweep()
    os._exit(code)


def main(argv: list[str]) -> int:
    parent, program, args = int(argv[0]), argv[1], argv[1:]
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    child = 0
    signal.signal(signal.SIGTERM, lambda *_: _end(child, 128 + signal.SIGTERM))
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the signal was armed
        return 128 + signal.SIGTERM
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)  # a group of its own, killed as one at the end
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(program, args)
        except OSError as e:
            os.write(2, f"owl: cannot start {program}: {e}\n".encode())
        os._exit(127)
    code = 127
    while True:
        try:
            # Left a zombie (WNOWAIT) until its group is killed: while it is
            # one, its pid, the group's id, cannot be handed to another
            # process, whose group the kill would hit instead. sweep() reaps it.
            info = os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        except ChildProcessError:
            break
        if info is not None and info.si_pid == child:
            exited = info.si_code == os.CLD_EXITED
            code = info.si_status if exited else 128 + info.si_status
            break
    _end(child, code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
