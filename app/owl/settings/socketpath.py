"""Where the daemon's socket is, worked out with `os` alone.

Every `owl` call needs this one path and nothing else of `paths`, which is
built on pathlib and a NamedTuple: with pathlib's urllib and the tempfile
module they were about 4 ms of an `owl status` whose interpreter starts in 9.
So the rule lives here, on strings; `paths` wraps it, and the daemon and the
command cannot place the socket apart.
"""

from __future__ import annotations

import os
import stat
import sys

# sun_path is 108 bytes on Linux and 104 on macOS, including the NUL.
SOCKET_PATH_MAX = 100


def home_root(home: str) -> str:
    """OWL_HOME as `Path(home).expanduser().absolute()` spells it: `~`
    expanded, made absolute, empty and `.` parts dropped, `..` kept."""
    full = os.path.expanduser(home)
    if not full.startswith("/"):
        full = os.path.join(os.getcwd(), full)
    return "/" + "/".join(p for p in full.split("/") if p not in ("", "."))


def runtime_in(root: str) -> str:
    """The folder of the pid file and (if short enough) the socket under OWL_HOME."""
    return os.path.join(root, "run")


def socket_in(runtime: str) -> str:
    """The socket's path, short enough for sun_path.

    A deep OWL_HOME would overflow the limit, so the socket then moves to a
    short per-user folder, named by a hash of the intended path so that the
    CLI computes the same place without asking anyone.
    """
    wanted = os.path.join(runtime, "owl.sock")
    if len(os.fsencode(wanted)) <= SOCKET_PATH_MAX:
        return wanted
    import hashlib  # only for deep homes: kept off the common path
    import tempfile

    digest = hashlib.sha256(os.fsencode(wanted)).hexdigest()[:16]
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"owl-{os.getuid()}", f"{digest}.sock")


def under_home() -> str | None:
    """The socket when OWL_HOME is set; None when the platform's own places
    are used (`paths.get_paths`, through platformdirs)."""
    home = os.environ.get("OWL_HOME")
    return socket_in(runtime_in(home_root(home))) if home else None


def home_lock() -> str:
    """The one-daemon lock under OWL_HOME (`owl.settings.daemonlock`), beside the database."""
    from owl.settings import daemonlock

    return daemonlock.path_in(home_root(os.environ.get("OWL_HOME") or "."))


def likely_default() -> str | None:
    """Where the socket is under the platform's own places, when that is
    plain without platformdirs: on Linux, `$XDG_RUNTIME_DIR/owl/owl.sock`
    once XDG_RUNTIME_DIR is what platformdirs accepts as such (an absolute
    folder, no symlink, ours, 0700, in a folder nobody else may rename it in).
    None for anything else (unset, shared, macOS): `paths` asks platformdirs.

    Importing platformdirs brings pathlib, typing and tempfile: 13 ms of an
    `owl status` whose interpreter starts in 9. A guess that finds no daemon
    is asked again at platformdirs' place (`owl.cli.common.ask`)."""
    base = os.environ.get("XDG_RUNTIME_DIR", "")
    if not sys.platform.startswith("linux") or not base.startswith("/"):
        return None
    try:
        own = os.lstat(base)
        parent = os.stat(os.path.dirname(base.rstrip("/")) or "/")
    except OSError:
        return None
    if not stat.S_ISDIR(own.st_mode) or own.st_uid != os.getuid():
        return None
    if stat.S_IMODE(own.st_mode) != 0o700:
        return None
    if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
        return None
    return socket_in(os.path.join(base, "owl"))
