"""The host's bound unix sockets and the top of its ``/run``, as a Run's sandbox must know them.

A unix socket bound at a path answers a ``connect()`` from whoever reaches the
path, whatever network namespace either side is in, and a read-only bind does
not stop it. The kernel lists the bound sockets of each network namespace
apart: ``/proc/net/unix`` holds only the reader's own. A socket a process of
another namespace bound (a container's, a rootless podman's, another sandbox's,
a program started under ``unshare -n``) is listed only in that namespace's
table, ``/proc/PID/net/unix`` of any of its processes. So the daemon's own
table is read, and one process's of each other namespace it can see
(``netns_tables``); what the daemon may not read (another user's process, for
a daemon not run as root) is passed over.

A socket a process bound in a mount namespace of its own (a container's, with
a folder of the home mounted as its volume at another path) is listed by the
path it used there. A listed path that holds no socket on the host is looked
for through the mounts of each other mount namespace the daemon may read: the
mount that holds it there, the file system's own path, and where the host has
that file system mounted.

Reads ``/proc`` only (no disk, no process started): one ``readlink`` per
process (about 3 µs each: 1.5 ms for 500 processes) and a table of a few
hundred rows per network namespace; where a listed socket is not at its path
on the host, one ``readlink`` more per process and a mountinfo per mount
namespace.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Iterable, Sequence

from .folders import under

# The host's folders of sockets (and pid files, locks) that a Run sees as an
# empty folder of its own: a socket there (docker's, podman's, snapd's, the
# system bus, the session's) answers a connect() through any read-only bind.
PRIVATE_SYSTEM = ("/run", "/var/run")

# The most network namespaces whose tables are read besides the daemon's own.
# A desktop has a handful (each container, a flatpak app's, each contained Run
# with a network of its own); a table is read in 50-80 µs, so 32 of them add
# at most some 2 ms to a Run's start, and a machine with hundreds of
# containers does not make every Run wait for all their tables. Namespaces
# are taken by their first process's pid, lowest first: the longest-lived,
# which are where a service listens.
NETNS_MOST = 32
# The most other mount namespaces a socket's path is looked for in, when a
# listed socket is not at its path on the host (bound by a process whose
# mounts differ: a container's volume, a service's private folder): each
# systemd service with PrivateTmp= or ProtectSystem= has one, a container one;
# a mountinfo is read in 50-130 µs, and only when such a socket is listed
# (21 of them and the scan for them: 3.4 ms).
MOUNTNS_MOST = 32
# The most socket paths taken, all tables together: a desktop has a few hundred.
PATHS_MOST = 4096
# Files the Run reads through a path that may lead into /run: the resolver's.
RESOLVER = ("/etc/resolv.conf",)


def masked_sockets(
    found: Iterable[str], covered: Iterable[str], opened: Iterable[str]
) -> tuple[str, ...]:
    """Of the host's sockets ``found``, those a Run would still see: not under a
    folder it sees empty or as its own (``covered``), not opened on purpose.
    Pure: the policy's, from what ``host_sockets`` found."""
    cover, keep = tuple(covered), set(opened)
    return tuple(
        dict.fromkeys(s for s in found if s not in keep and not any(under(s, c) for c in cover))
    )


def others(kind: str, proc: str = "/proc", most: int = NETNS_MOST) -> list[str]:
    """A process's folder (``/proc/PID``) for each namespace of ``kind``
    ("net", "mnt") but the daemon's own whose ``ns/KIND`` it may read, at most
    ``most``: grouped by the namespace's inode, as ``readlink`` names it."""
    try:
        seen = {os.readlink(f"{proc}/self/ns/{kind}")}
        entries = os.listdir(proc)
    except OSError:
        return []
    out: list[str] = []
    for pid in sorted(int(e) for e in entries if e.isdigit()):
        if len(out) >= most:
            break
        try:
            ns = os.readlink(f"{proc}/{pid}/ns/{kind}")
        except OSError:  # gone, or not the daemon's to read
            continue
        if ns not in seen:
            seen.add(ns)
            out.append(f"{proc}/{pid}")
    return out


def netns_tables(proc: str = "/proc", most: int = NETNS_MOST) -> tuple[str, ...]:
    """The socket table of the daemon's own network namespace, then one of a
    process of each other namespace it may read (at most ``most`` more)."""
    return (f"{proc}/self/net/unix", *(f"{p}/net/unix" for p in others("net", proc, most)))


_OCTAL = re.compile(r"\\([0-7]{3})")


def mounts(folder: str) -> list[tuple[str, str, str]]:
    """(device, root in its file system, mount point) of each mount a process
    (``folder``: /proc/PID) sees, in mountinfo's order; none when unreadable."""
    try:
        with open(f"{folder}/mountinfo", "rb") as f:
            text = f.read(4 << 20).decode("utf-8", "surrogateescape")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 5)
        if len(parts) == 6:
            root, point = (_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), p) for p in parts[3:5])
            out.append((parts[2], root, point))
    return out


def translated(
    written: str, theirs: Sequence[tuple[str, str, str]], ours: Sequence[tuple[str, str, str]]
) -> list[str]:
    """Where a path of another mount namespace lies in the daemon's: the mount
    of theirs that holds it (the deepest, the last laid), the path in its file
    system, then each mount of ours of that file system whose root holds it."""
    held = [m for m in reversed(theirs) if under(written, m[2])]
    if not held:
        return []
    dev, root, point = max(held, key=lambda m: len(m[2]))
    inner = posixpath.normpath(posixpath.join(root, posixpath.relpath(written, point)))
    return [
        posixpath.normpath(posixpath.join(at, posixpath.relpath(inner, r)))
        for d, r, at in ours
        if d == dev and under(inner, r)
    ]


def bound_paths(tables: Sequence[str], most: int = PATHS_MOST) -> list[bytes]:
    """The paths the sockets of ``tables`` were bound at (an abstract one has
    none: it is reached only from its own namespace), each once, sorted."""
    paths: set[bytes] = set()
    for table in tables:
        try:
            with open(table, "rb") as f:
                rows = f.read(4 << 20).splitlines()[1:]
        except OSError:  # its process is gone since: its sockets were its own
            continue
        for row in rows:
            parts = row.split(None, 7)
            if len(parts) == 8 and parts[7].startswith(b"/"):
                paths.add(parts[7])
                if len(paths) >= most:
                    return sorted(paths)
    return sorted(paths)


def host_sockets(
    tables: Sequence[str] | None = None,
    most: int = PATHS_MOST,
    skip: Sequence[str] = (),
    proc: str = "/proc",
) -> tuple[str, ...]:
    """The paths (resolved) of the unix sockets bound on this host, in every
    network namespace in sight (``netns_tables``, or ``tables``); ``most``
    paths. Those written under a folder of ``skip`` (the Run's own /tmp, the
    private /run) are left out before their paths are resolved, which is most
    of the time this takes (/var/run's lead there too: it is resolved once).
    A path that holds no socket on the host is looked for through the mounts
    of each other mount namespace in sight (``translated``)."""
    cover = tuple(skip)
    if any(os.path.realpath("/var/run") == c for c in cover):
        cover += ("/var/run",)
    out: list[str] = []

    def found(path: str) -> bool:
        real = os.path.realpath(path)
        try:
            if not stat.S_ISSOCK(os.stat(real).st_mode):
                return False
        except (OSError, ValueError):
            return False
        if real not in out:
            out.append(real)
        return True

    elsewhere: list[str] = []  # listed, but no socket at that path on the host
    for raw in bound_paths(netns_tables(proc) if tables is None else tables, most):
        written = os.fsdecode(raw)
        if not any(under(written, c) for c in cover) and not found(written):
            elsewhere.append(written)
    if elsewhere:  # bound in a mount namespace of its own, under a path of its own?
        ours = mounts(f"{proc}/self")
        for folder in others("mnt", proc, MOUNTNS_MOST):
            theirs = mounts(folder)
            for written in elsewhere:
                for path in translated(written, theirs, ours):
                    found(path)
    return tuple(out)


def private_system(
    tops: tuple[str, ...] = PRIVATE_SYSTEM,
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Of ``tops`` (``PRIVATE_SYSTEM``), the real folders, the symlinks directly
    in them and the resolver's file that lies there (as ``policy.Facts`` takes them)."""
    private = [top for top in tops if os.path.isdir(top) and not os.path.islink(top)]
    links: list[tuple[str, str]] = []
    for top in private:
        try:
            with os.scandir(top) as entries:
                links += [(e.path, os.readlink(e.path)) for e in entries if e.is_symlink()]
        except OSError:
            continue
    files = []
    for path in RESOLVER:
        real = os.path.realpath(path)
        if any(under(real, top) for top in private) and os.path.isfile(real):
            files.append(real)
    return tuple(private), tuple(links), tuple(files)
