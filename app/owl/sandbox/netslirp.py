"""slirp4netns attached to a Run's namespace, where pasta is missing
(loaded by ``netns.py``, standard library only).

Why a module of its own: the fallback's start (by open fds, in the
foreground, its word on a ready fd, its end on an exit fd) shares nothing
with pasta's but the process helpers.
"""

from __future__ import annotations

import os
import select
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from owl.sandbox import netproc
else:  # run by netns.py as a script (-I -S): its siblings, already on the path
    import netproc


class Slirp:
    """slirp4netns running for the sandbox; ``end()`` once the sandbox has ended."""

    def __init__(self, pid: int, exit_w: int) -> None:
        self.pid, self.exit_w = pid, exit_w

    def end(self) -> None:
        os.close(self.exit_w)  # its word to leave
        if netproc.wait(self.pid, netproc.READY_TIMEOUT) is None:
            os.kill(self.pid, signal.SIGKILL)
            netproc.wait(self.pid)


def start(slirp: str, pid: int) -> tuple[str | None, Slirp | None]:
    """Attach slirp4netns to bwrap's child's namespaces (by open fds, as pasta):
    (why not or None, what ends it once the sandbox has)."""
    fds: list[int] = []
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    try:
        net, user = netproc.namespaces(pid)
        fds += [net] if user is None else [net, user]
        argv = [
            slirp,
            "--configure",
            "--mtu=65520",
            "--disable-host-loopback",
            f"--ready-fd={ready_w}",
            f"--exit-fd={exit_r}",
            "--netns-type=path",
        ]
        if user is not None:
            argv.append(f"--userns-path=/proc/self/fd/{user}")
        argv += [f"/proc/self/fd/{net}", "tap0"]
        null = os.open(os.devnull, os.O_WRONLY)
        fds.append(null)
        # chatty on stderr; SIGTERM blocked as for pasta
        child = netproc.spawn(argv, (*fds[:-1], ready_w, exit_r), quiet=null, block=True)
    except OSError as e:
        os.close(exit_w)
        os.close(ready_r)
        return str(e), None
    finally:
        for fd in (*fds, ready_w, exit_r):
            os.close(fd)
    up = select.select([ready_r], [], [], netproc.READY_TIMEOUT)[0] and os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    helper = Slirp(child, exit_w)
    if not up:
        helper.end()
        return "slirp4netns did not bring the network up", None
    return None, helper
