"""Asking this home's daemon wherever its socket is.

A command works out the socket from its own environment (OWL_HOME, or
XDG_RUNTIME_DIR through platformdirs). A shell that sees another runtime
folder than the daemon did (ssh, su, a desktop that came later) works out
another place and would find nobody there. So, when nobody answers there, the
home's lock (`owl.settings.daemonlock`, beside the database) is read: held by
a live daemon, it names the socket that daemon listens on, and the request
goes there.

Talking to that socket is safe: the lock file lives in the person's own
private data folder and only a daemon of this home writes it; the socket must
be theirs too (owned by them, a socket), and the daemon checks the caller's
uid on every connection. Refusing instead would leave the person no way to
reach the daemon that runs their Jobs from that shell, short of guessing its
environment.

When the lock is held and that socket does not answer either, no daemon may
be started beside it: `Unreachable` says so, naming the daemon and its socket.
"""

from __future__ import annotations

import os
import stat

from owl.control.client import ask as _ask
from owl.errors import NoDaemon, Unreachable
from owl.settings import daemonlock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def ask(
    socket: str,
    lock: Callable[[], str],
    verb: str,
    args: dict[str, Any] | None = None,
    timeout: float = 60.0,
) -> Any:
    """Ask the daemon at `socket`; when nobody is there, the one the home's
    lock (`lock()`, worked out only then) names. NoDaemon when none holds it."""
    try:
        return _ask(socket, verb, args, timeout)
    except NoDaemon as nobody:  # raised before anything was sent: asking again is safe
        return through_lock(lock(), socket, verb, args, timeout, nobody)


def through_lock(
    lock: str,
    tried: str,
    verb: str,
    args: dict[str, Any] | None,
    timeout: float,
    nobody: NoDaemon,
) -> Any:
    """The request asked of the daemon holding `lock`, its socket not `tried`."""
    holder = daemonlock.holder(lock)
    if holder is None or not holder.alive():
        raise nobody
    if holder.socket and holder.socket != tried and _ours(holder.socket):
        try:
            return _ask(holder.socket, verb, args, timeout)
        except NoDaemon:
            pass
    if holder.state in (daemonlock.STARTING, daemonlock.STOPPING):
        raise Unreachable(  # a moment, either way: worth waiting for
            f"the Owl daemon of this home is {holder.state} ({holder.naming()})", starting=True
        )
    raise Unreachable(
        f"an Owl daemon holds this home ({holder.naming()}) but does not answer there; "
        "owl starts no other beside it (its log says why; kill it if it is stuck)"
    )


def _ours(path: str) -> bool:
    """Whether `path` is a socket that belongs to this user (not a file planted
    in its place)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()
