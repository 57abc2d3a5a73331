"""Ask the running daemon one thing over its socket. Light: the CLI imports it.

It speaks through `_socket`, the C module under `socket`: one Unix stream
socket is all it needs, and `socket.py` builds its enums and imports
`selectors` at import, which cost `owl status` more than the rest of this
module (about 1.7 ms of an interpreter's 11)."""

from __future__ import annotations

import _socket
import json
import os
import time

from owl.control import protocol
from owl.errors import NoDaemon, Refused

# Not typing.TYPE_CHECKING: importing typing costs each `owl` call ~2 ms;
# type checkers read a TYPE_CHECKING of our own alike.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class DaemonError(Exception):
    """The daemon answered something this command cannot read; str() is one line.

    `exit_code` is what the command exits with: 2 when the daemon calls the
    request malformed (a protocol mismatch), 1 otherwise."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _connect(s: _socket.socket, sock_path: str | os.PathLike[str], timeout: float) -> None:
    """Connect, waiting out a full listen queue for up to `timeout` seconds.

    With a timeout set the socket is non-blocking underneath, and a Unix
    socket whose listen queue is full answers a non-blocking connect with
    EAGAIN at once rather than queueing it (a blocking connect would sleep in
    the kernel instead). A full queue means the daemon is busy accepting, not
    gone: try again shortly, as the blocking connect would have waited."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            s.connect(os.fspath(sock_path))
            return
        except BlockingIOError:
            if time.monotonic() + pause > deadline:
                raise DaemonError(
                    f"the daemon did not take the connection within {timeout:g} s"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.1)


def ask(
    sock_path: str | os.PathLike[str],
    verb: str,
    args: dict[str, Any] | None = None,
    timeout: float = 60.0,
) -> Any:
    """Send one request; return the reply's data, or raise Refused / NoDaemon / DaemonError."""
    data = protocol.request(verb, args)
    if len(data) > protocol.MAX_REQUEST:
        # The daemon would stop reading at its limit; say so here, in words.
        raise Refused(
            f"the request is {len(data):,} bytes; the daemon reads at most {protocol.MAX_REQUEST:,}"
        )
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(timeout)
    buf = bytearray()
    try:
        try:
            _connect(s, sock_path, timeout)
        except (FileNotFoundError, ConnectionRefusedError):
            # No file, or a socket file left behind by a daemon that was killed.
            raise NoDaemon(
                "no Owl daemon is running (start one with: owl daemon --detach)"
            ) from None
        except PermissionError:
            raise Refused(f"{sock_path} belongs to another user") from None
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may have answered (refused) before reading it all
        try:
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > protocol.MAX_REPLY:
                    raise DaemonError("the daemon's reply is too large")
        except TimeoutError:
            raise DaemonError(f"the daemon did not answer {verb!r} within {timeout:g} s") from None
        except ConnectionResetError:
            if not buf:
                raise DaemonError("the daemon closed the connection without answering") from None
    finally:
        s.close()
    if not buf:
        raise DaemonError("the daemon closed the connection without answering")
    try:
        reply = json.loads(buf)
    except ValueError:
        raise DaemonError("the daemon's reply is not JSON") from None
    if not isinstance(reply, dict):
        raise DaemonError("the daemon's reply is not a JSON object")
    if reply.get("v") != protocol.VERSION:
        raise DaemonError(
            f"the daemon speaks protocol {reply.get('v')!r}, this command "
            f"{protocol.VERSION}: restart the daemon with the same Owl"
        )
    if not reply.get("ok"):
        message = str(reply.get("error") or "refused").splitlines()[0]
        if reply.get("exit") == 2:
            raise DaemonError(message, 2)
        raise Refused(message)
    return reply.get("data")
