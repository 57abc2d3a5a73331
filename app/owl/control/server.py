"""The daemon's end of the control socket.

A Unix socket, mode 0600 in a 0700 folder, and the peer's uid checked on every
connection: another user on the machine can neither queue work nor read
prompts. Each connection carries one request and gets one reply. A client that
says nothing, sends garbage, or sends too much is answered (or dropped) without
holding up anyone else: connections are served on their own threads, bounded
in number and in how long they may take.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from owl.control import protocol
from owl.errors import Refused

log = logging.getLogger("owl.control")

READ_TIMEOUT = 5.0          # a whole request must arrive within this, however slowly sent
MAX_CLIENTS = 64
DRAIN_LIMIT = 16 << 20      # after refusing an oversized request, read at most this much more


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end (SO_PEERCRED / getpeereid)."""
    if sys.platform.startswith("linux"):
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        if libc.getpeereid(conn.fileno(), ctypes.byref(uid), ctypes.byref(gid)) == 0:
            return uid.value
    except (OSError, AttributeError):
        pass
    return None


class Server:
    def __init__(self, path: Path, handle: Callable[[str, dict[str, Any]], Any]) -> None:
        self.path = Path(path)
        self.handle = handle
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)
        self._sock: socket.socket | None = None
        self._closing = False

    def listen(self) -> None:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(folder)
        if st.st_uid != os.getuid() or not os.path.isdir(folder) or os.path.islink(folder):
            # e.g. /tmp/owl-<uid> made by someone else first: they could swap our socket
            raise PermissionError(f"{folder} is not a folder of this user's own")
        if st.st_mode & 0o077:
            folder.chmod(0o700)
        if self.path.exists() or self.path.is_symlink():
            self.path.unlink()          # stale: the daemon lock says no one else serves it
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            s.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        s.listen(128)
        self._sock = s
        threading.Thread(target=self._accept, name="owl-control", daemon=True).start()

    def close(self) -> None:
        self._closing = True
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        try:
            self.path.unlink()
        except OSError:
            pass

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._closing:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                if self._closing:
                    return
                continue
            if not self._slots.acquire(blocking=False):
                self._reply(conn, protocol.error("the daemon is busy with other clients; try again"))
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="owl-client").start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                self._reply(conn, protocol.error("this Owl daemon belongs to another user"))
                return
            line = self._read_line(conn)
            if line is None:
                return
            try:
                verb, args = protocol.parse_request(line)
            except protocol.ProtocolError as e:
                self._reply(conn, protocol.error(str(e), 2))
                return
            try:
                data = self.handle(verb, args)
            except Refused as e:
                self._reply(conn, protocol.error(str(e), 1))
                return
            except Exception as e:  # a bug must not take the daemon down
                log.exception("verb %s failed", verb)
                self._reply(conn, protocol.error(f"internal error in {verb}: {e}", 1))
                return
            self._reply(conn, protocol.ok(data))
        finally:
            conn.close()
            self._slots.release()

    def _read_line(self, conn: socket.socket) -> bytes | None:
        """One request line, or None when it was refused or never came.

        The deadline covers the whole request, so a client that trickles a
        byte now and then cannot hold a thread for longer than READ_TIMEOUT."""
        deadline = time.monotonic() + READ_TIMEOUT
        buf = bytearray()
        try:
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout
                conn.settimeout(left)
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > protocol.MAX_REQUEST:
                    self._reply(conn, protocol.error(
                        f"request larger than {protocol.MAX_REQUEST:,} bytes", 2))
                    self._drain(conn, deadline)
                    return None
        except socket.timeout:
            self._reply(conn, protocol.error("no request within 5 s", 2))
            return None
        except OSError:
            return None
        if not buf.strip():
            return None
        return bytes(buf.split(b"\n", 1)[0])

    @staticmethod
    def _drain(conn: socket.socket, deadline: float) -> None:
        """Read (and drop) what the client is still sending, within bounds.

        Closing a Unix socket with unread data makes the peer's next read fail
        with ECONNRESET, and the refusal already sent would be lost."""
        try:
            conn.shutdown(socket.SHUT_WR)
            dropped = 0
            while dropped < DRAIN_LIMIT:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                conn.settimeout(left)
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                dropped += len(chunk)
        except OSError:
            return

    @staticmethod
    def _reply(conn: socket.socket, data: bytes) -> None:
        try:
            conn.settimeout(READ_TIMEOUT)
            conn.sendall(data)
        except OSError:
            pass
