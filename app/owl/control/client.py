"""Ask the running daemon one thing over its socket. Light: the CLI imports it."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from owl.control import protocol
from owl.errors import NoDaemon, Refused


class DaemonError(Exception):
    """The daemon answered something this command cannot read."""


def ask(sock_path: Path, verb: str, args: dict[str, Any] | None = None,
        timeout: float = 60.0) -> Any:
    """Send one request; return the reply's data, or raise Refused / NoDaemon."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(str(sock_path))
        except (FileNotFoundError, ConnectionRefusedError):
            raise NoDaemon("no Owl daemon is running (start it with: owl daemon)") from None
        except PermissionError:
            raise Refused(f"{sock_path} belongs to another user") from None
        s.sendall(protocol.request(verb, args))
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
            if len(buf) > protocol.MAX_REPLY:
                raise DaemonError("the daemon's reply is too large")
    finally:
        s.close()
    if not buf:
        raise DaemonError("the daemon closed the connection without answering")
    try:
        reply = json.loads(buf)
    except ValueError:
        raise DaemonError("the daemon's reply is not JSON") from None
    if reply.get("v") != protocol.VERSION:
        raise DaemonError(f"the daemon speaks protocol {reply.get('v')!r}, this command "
                          f"{protocol.VERSION}: restart the daemon with the same Owl")
    if not reply.get("ok"):
        if reply.get("exit") == 2:
            raise DaemonError(reply.get("error", "refused"))
        raise Refused(reply.get("error", "refused"))
    return reply.get("data")
