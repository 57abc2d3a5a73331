"""bwrap's hand-off: its options and the Run's seccomp filter by memfds, and
its word on whether its own set-up finished (``--json-status-fd``).

Why a module of its own: ``netns.py`` makes the Run's network (pasta,
slirp4netns, the routes, the allow-list's proxy); how bwrap is handed what it
must know, and how its start is judged, is another matter, the same with a
network or without.

bwrap's options are handed over in a memfd (``--args FD``), not on its command
line: its pid 1 inside the Run keeps that command line, readable by the Run at
``/proc/1/cmdline``, and the options name Owl's folders and the host's sockets.
The filter (``owl.sandbox.syscalls``) goes the same way (``--seccomp FD``):
bwrap loads it just before it execs the command, and closes both fds.

Standard library only (``os``): ``netns.py`` loads it as a sibling while it
runs as a script with ``-I -S``.
"""

from __future__ import annotations

import os


def present(bwrap: list[str]) -> list[str]:
    """bwrap's argv without the /dev/null laid over a file (a host socket, a
    hidden file) that is gone since the argv was made: bwrap would have to
    make it on the read-only root, and the Run would fail for a socket that a
    program closed a moment before. Where there is none, there is nothing to cover."""
    out: list[str] = []
    i = 0
    while i < len(bwrap):
        if bwrap[i] == "--" or i + 2 >= len(bwrap):
            return out + bwrap[i:]
        if bwrap[i : i + 2] == ["--ro-bind", "/dev/null"] and not os.path.lexists(bwrap[i + 2]):
            i += 3
            continue
        out.append(bwrap[i])
        i += 1
    return out


def memfd(name: str, data: bytes) -> int:
    """An inheritable memfd holding ``data``, read from its start."""
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def hidden(
    bwrap: list[str], extra: list[str], seccomp: bytes | None
) -> tuple[list[str], tuple[int, ...]]:
    """bwrap's argv with its options (``extra`` first) in a memfd and the
    filter in another: (the argv, the fds it must inherit)."""
    at = bwrap.index("--")
    options, command = [*extra, *bwrap[1:at]], bwrap[at:]
    fds: tuple[int, ...] = ()
    if seccomp is not None:
        filt = memfd("owl-seccomp", seccomp)
        options += ["--seccomp", str(filt)]
        fds = (filt,)
    args = memfd("owl-bwrap-args", b"".join(o.encode() + b"\0" for o in options))
    return [bwrap[0], "--args", str(args), *command], (*fds, args)


def set_up(status: int) -> bool:
    """Whether bwrap's set-up finished and it ran the command, from what it wrote
    to ``--json-status-fd``: it writes the command's "exit-code" only then, and
    from its own process outside the Run, where nothing inside can write or
    stop it (its fd is not passed in). A start that failed at bwrap's own
    set-up (a bind it could not make, a filter it could not load) has none."""
    data = b""
    while True:
        chunk = read_some(status)
        if not chunk:
            return b'"exit-code"' in data
        data += chunk


def read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""
