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

Paths are taken as the host sees them: a socket a process bound in a mount
namespace of its own (a container's) is listed by the path it used there, and
is found only where that path is the same on the host (a folder mounted at the
same place); one bound under another path is not.

Reads ``/proc`` only (no disk, no process started): one ``readlink`` per
process (about 3 µs each: 1.5 ms for 500 processes) and a table of a few
hundred rows per namespace.
"""

from __future__ import annotations

import os
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


def netns_tables(proc: str = "/proc", most: int = NETNS_MOST) -> tuple[str, ...]:
    """The socket table of the daemon's own network namespace, then one of a
    process of each other namespace whose ``ns/net`` it may read (at most
    ``most`` more): grouped by the namespace's inode, as ``readlink`` names it."""
    own = f"{proc}/self/net/unix"
    try:
        seen = {os.readlink(f"{proc}/self/ns/net")}
    except OSError:
        return (own,)
    tables = [own]
    try:
        entries = os.listdir(proc)
    except OSError:
        return (own,)
    for pid in sorted(int(e) for e in entries if e.isdigit()):
        if len(tables) > most:
            break
        try:
            ns = os.readlink(f"{proc}/{pid}/ns/net")
        except OSError:  # gone, or not the daemon's to read
            continue
        if ns not in seen:
            seen.add(ns)
            tables.append(f"{proc}/{pid}/net/unix")
    return tuple(tables)


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
    tables: Sequence[str] | None = None, most: int = PATHS_MOST, skip: Sequence[str] = ()
) -> tuple[str, ...]:
    """The paths (resolved) of the unix sockets bound on this host, in every
    network namespace in sight (``netns_tables``, or ``tables``); ``most``
    paths. Those written under a folder of ``skip`` (the Run's own /tmp, the
    private /run) are left out before their paths are resolved, which is most
    of the time this takes (/var/run's lead there too: it is resolved once)."""
    cover = tuple(skip)
    if any(os.path.realpath("/var/run") == c for c in cover):
        cover += ("/var/run",)
    out: list[str] = []
    for raw in bound_paths(netns_tables() if tables is None else tables, most):
        written = os.fsdecode(raw)
        if any(under(written, c) for c in cover):
            continue
        real = os.path.realpath(written)
        try:
            if stat.S_ISSOCK(os.stat(real).st_mode) and real not in out:
                out.append(real)
        except (OSError, ValueError):
            continue
    return tuple(out)


def private_system() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Of ``PRIVATE_SYSTEM``, the real folders, the symlinks directly in them
    and the resolver's file that lies there (as ``policy.Facts`` takes them)."""
    private = [top for top in PRIVATE_SYSTEM if os.path.isdir(top) and not os.path.islink(top)]
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
