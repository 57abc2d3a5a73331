"""The daemon's end of the control socket.

A Unix socket, mode 0600 in a 0700 folder, and the peer's uid checked on every
connection: another user on the machine can neither queue work nor read
prompts. Each connection carries one request and gets one reply. A client that
says nothing, sends garbage, or sends too much is answered (or dropped) without
holding up anyone else: requests are read on one thread with a selector and
served on a small pool, and connections are bounded in number and in how long
they may take.
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from owl.control import protocol
from owl.errors import Refused

log = logging.getLogger("owl.control")

READ_TIMEOUT = 5.0  # a whole request must arrive within this, however slowly sent
WORKERS = 8  # threads serving complete requests
BUSY = "the daemon is busy with other clients; try again"
DRAIN_LIMIT = 16 << 20  # after refusing an oversized request, read at most this much more


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


@dataclass
class _Pending:
    """A connection whose request has not fully arrived yet."""

    deadline: float
    buf: bytearray = field(default_factory=bytearray)


class Server:
    """Reads requests on one thread with a selector, serves them on a small pool.

    A connection that is still sending (or says nothing) costs a socket and a
    buffer, not a thread, so a flood of silent or slow clients can neither
    exhaust the daemon's memory nor keep the person's `owl status` waiting:
    only complete requests reach the worker threads. Connections are bounded
    in number; past the bound the connection that has waited longest without
    finishing its request is told the daemon is busy, and makes room.
    """

    def __init__(self, path: Path, handle: Callable[[str, dict[str, Any]], Any]) -> None:
        self.path = Path(path)
        self.handle = handle
        self._sock: socket.socket | None = None
        self._closing = False
        self._sel = selectors.DefaultSelector()
        self._pending: dict[socket.socket, _Pending] = {}
        self._inflight = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="owl-client")
        self._wake_r, self._wake_w = os.pipe()
        self._max = _max_connections()

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
            self.path.unlink()  # stale: the daemon lock says no one else serves it
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            s.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        s.listen(128)
        s.setblocking(False)
        self._sock = s
        self._sel.register(s, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        threading.Thread(target=self._loop, name="owl-control", daemon=True).start()

    def close(self) -> None:
        self._closing = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
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
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ the reader

    def _loop(self) -> None:
        while not self._closing:
            timeout = None
            if self._pending:
                timeout = max(
                    0.0, min(p.deadline for p in self._pending.values()) - time.monotonic()
                )
            try:
                events = self._sel.select(timeout)
            except OSError:
                if self._closing:
                    return
                continue
            for key, _ in events:
                if key.fileobj is self._sock:
                    self._accept()
                elif key.fileobj == self._wake_r:
                    return
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]
            self._expire(time.monotonic())

    def _accept(self) -> None:
        assert self._sock is not None
        while True:
            try:
                conn, _ = self._sock.accept()
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    log.warning("out of file descriptors; refusing connections for a moment")
                    time.sleep(0.05)
                return
            with self._lock:
                full = len(self._pending) + self._inflight >= self._max
            if full and self._pending:
                # Make room by dropping the connection that has waited longest
                # without finishing its request: a flood of silent clients
                # then only ever pushes out itself, never a person's command.
                oldest = next(iter(self._pending))
                self._detach(oldest)
                _send_and_close(oldest, protocol.error(BUSY))
            elif full:
                _send_and_close(conn, protocol.error(BUSY))
                continue
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                _send_and_close(conn, protocol.error("this Owl daemon belongs to another user"))
                continue
            conn.setblocking(False)
            self._pending[conn] = _Pending(time.monotonic() + READ_TIMEOUT)
            self._sel.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        p = self._pending.get(conn)
        if p is None:
            return
        try:
            chunk = conn.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            self._detach(conn)
            conn.close()
            return
        p.buf += chunk
        if len(p.buf) > protocol.MAX_REQUEST:
            self._detach(conn)
            self._submit(self._refuse_oversized, conn, p.deadline)
        elif b"\n" in p.buf or not chunk:
            self._detach(conn)
            if not p.buf.strip():
                conn.close()  # connected and left without a word
                return
            self._submit(self._serve, conn, bytes(p.buf.split(b"\n", 1)[0]))

    def _expire(self, now: float) -> None:
        for conn, p in list(self._pending.items()):
            if now >= p.deadline:
                self._detach(conn)
                _send_and_close(conn, protocol.error("no request within 5 s", 2))

    def _detach(self, conn: socket.socket) -> None:
        self._pending.pop(conn, None)
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _submit(self, fn: Callable[..., None], conn: socket.socket, arg: Any) -> None:
        with self._lock:
            self._inflight += 1

        def run() -> None:
            try:
                fn(conn, arg)
            finally:
                conn.close()
                with self._lock:
                    self._inflight -= 1

        try:
            self._pool.submit(run)
        except RuntimeError:  # shutting down
            conn.close()
            with self._lock:
                self._inflight -= 1

    # ------------------------------------------------------------ the workers

    def _serve(self, conn: socket.socket, line: bytes) -> None:
        conn.setblocking(True)
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

    def _refuse_oversized(self, conn: socket.socket, deadline: float) -> None:
        conn.setblocking(True)
        self._reply(conn, protocol.error(f"request larger than {protocol.MAX_REQUEST:,} bytes", 2))
        self._drain(conn, deadline)

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


def _max_connections() -> int:
    """How many connections may be open at once: well inside the fd limit."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 4096
    return max(16, min(1024, soft // 2))


def _send_and_close(conn: socket.socket, data: bytes) -> None:
    """A short answer to a connection that gets no more: never blocks the reader."""
    try:
        conn.setblocking(False)
        conn.send(data)
    except OSError:
        pass
    finally:
        conn.close()
