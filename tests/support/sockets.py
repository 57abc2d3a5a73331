"""Whether a unix socket answers: the test of a server being ready.

A server binds its socket's name a moment before it listens on it (sway's IPC
socket, dbus-daemon's bus), so the file being there is not yet a socket that
takes a connection; only a connection that is accepted says so."""

from __future__ import annotations

import socket
from pathlib import Path


def answers(path: Path) -> bool:
    """True once a connection to `path` is accepted (it is closed at once)."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True
