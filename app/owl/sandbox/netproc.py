"""How ``netns.py`` starts, waits for and reads the processes it runs: bwrap,
pasta, slirp4netns, the routes' holder, the allow-list's proxy (standard
library only: loaded by ``netns.py``, run as a script with ``-I -S``).

Without ``subprocess``, whose import alone doubles the helper's start
(see ``netns.py``): processes are started by fork and exec, their signal
mask and dispositions set in between, and waited for through a pidfd.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal

READY_TIMEOUT = 10.0
NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1): the user namespace that owns a namespace
TERM = {signal.SIGTERM}
# Python ignores these for itself; what it starts gets them back (as subprocess does).
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)


def spawn(
    argv: list[str], keep: tuple[int, ...] = (), *, quiet: int | None = None, block: bool = False
) -> int:
    """Start ``argv`` (searched on PATH) with the fds ``keep`` open in it; with
    ``quiet`` (an fd for its stderr) its stdin and stdout are /dev/null, else
    they are ours (the agent's); SIGTERM blocked in it when ``block``. Every
    other fd of ours is close-on-exec (Python's default). Returns its pid.

    A plain fork and exec (this helper has no threads): ``os.posix_spawn``
    would leave glibc's own signals (32, 33) ignored in what it starts."""
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: nothing here may return
        if quiet is not None:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(quiet, 2)
        for fd in keep:
            os.set_inheritable(fd, True)
        for sig in RESTORED:
            signal.signal(sig, signal.SIG_DFL)
        if block:
            signal.pthread_sigmask(signal.SIG_BLOCK, TERM)
        os.execvp(argv[0], argv)
    except BaseException as e:
        try:
            os.write(2, f"owl: cannot start {argv[0]}: {e}\n".encode())
        finally:
            os._exit(127)
    os._exit(127)  # pragma: no cover - execvp does not return


def wait(pid: int, timeout: float | None = None) -> int | None:
    """The exit status of our child ``pid`` as subprocess gives it (negative:
    a signal), or None if it is still running after ``timeout`` seconds."""
    if timeout is not None:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                if not select.select([fd], [], [], timeout)[0]:
                    return None
            finally:
                os.close(fd)
    while True:
        try:
            _, raw = os.waitpid(pid, 0)
        except ChildProcessError:
            return 127
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        return os.waitstatus_to_exitcode(raw)


def read_now(fd: int) -> str:
    """What is in the pipe now, without waiting (a writer may hold it open)."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 4096).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def namespaces(pid: int) -> tuple[int, int | None]:
    """Open bwrap's child ``pid``'s network namespace and the user namespace
    that owns it: (their fds, close-on-exec; the second None where that is
    ours, as for root where none could be made). A helper joins the second to
    have the rights to join the first.

    Not the child's own ``/proc/PID/ns/user``: for an ordinary user bwrap maps
    the user to 0 in the namespace it makes (to mount ``/dev``'s devpts), then
    makes a second one inside it that maps the user back, before it waits on
    ``--block-fd``. Opened after that, the child's is the second, which has no
    rights over the network namespace its parent owns: joining it, setns
    failed with EPERM and the Run had no network (seen once in a while, when
    bwrap's set-up outran ours). The owner, asked of the network namespace
    itself (``NS_GET_USERNS``), is the same whenever it is asked."""
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        user = fcntl.ioctl(net, NS_GET_USERNS)
    except OSError:
        os.close(net)
        raise
    if os.fstat(user).st_ino == os.stat("/proc/self/ns/user").st_ino:
        os.close(user)
        return net, None
    return net, user
