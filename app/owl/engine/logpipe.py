"""A Run's output, carried from the agent into its log with the cap kept as written.

The agent's stdout and stderr are the write end of a pipe; Owl reads the other
end and writes the log. So the log never holds more than its cap (a file the
agent wrote itself could grow by gigabytes between two looks at it), and the
file can be rotated without any space to spare:

- past the cap, the log is renamed to `<log>.1` (replacing the older one,
  which frees its space) and a new log begins; renaming takes no space;
- a write the disk refuses first removes `<log>.1`, then keeps the newest
  output in memory (at most MEMORY_CAP bytes) and tries again with the next
  output; what had to be dropped is said in the log once it writes again.

Two threads per Run, so that neither the engine nor the agent waits on the
disk: a reader that only moves bytes from the pipe into memory (the agent
blocks only while the pipe itself is full), and a writer that moves them from
memory to the file. Memory is bounded: past MEMORY_CAP the reader waits for
the writer to take what it holds (the agent then waits on its pipe, as it would
writing a file of its own), but never on a full disk nor for longer than
SLOW_DISK without the writer getting on; then the oldest unwritten bytes are
dropped, as the log's own cap would have dropped them. (Without the wait, a
burst of output on a healthy disk lost megabytes: the reader can take 4 MB
before the writer's thread is next scheduled.)
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Callable

log = logging.getLogger("owl.logpipe")

MEMORY_CAP = 4 * 1024 * 1024  # unwritten output held in memory, at most
READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20  # asked of Linux; the agent writes this much unhindered
DRAIN_AFTER_CLOSE = 2.0  # a writer left after the Run ended: how long it may hold on
KEEP_TRYING = 30.0  # after the Run: how long output waits in memory for room
SLOW_DISK = 1.0  # past MEMORY_CAP: how long the reader waits on a writer that gets nowhere


class Sink:
    """One Run's log: `fd` is what the agent writes to; `received` counts bytes."""

    def __init__(self, path: Path, cap: int, tap: Callable[[bytes], None] | None = None) -> None:
        self.path = Path(path)
        self.tap = tap  # shown each chunk on the reader's thread (a live meter)
        self.old = self.path.with_name(self.path.name + ".1")
        self.cap = cap
        self.received = 0  # bytes read from the agent (the engine's sign of life)
        self.dropped = 0  # bytes that never reached the disk
        self._said_dropped = 0
        self._rotate_failed = False
        self._buf: list[bytes] = []
        self._buffered = 0
        self._eof = False
        self._writing = False  # the writer holds bytes taken from _buf, not yet written
        self._refused = False  # the disk refused the writer's last write (full)
        self._progress = 0  # bytes the writer has put down
        self._closing = False
        self._cond = threading.Condition()
        self._file = self._open_new()
        self._size = os.fstat(self._file).st_size
        r, w = os.pipe()  # both ends close-on-exec: only fds 1 and 2 reach the agent
        _widen(w)
        self._r, self.fd = r, w
        self._reader = threading.Thread(
            target=self._read_loop, daemon=True, name=f"owl-log-read-{self.path.stem}"
        )
        self._writer = threading.Thread(
            target=self._write_loop, daemon=True, name=f"owl-log-write-{self.path.stem}"
        )
        self._reader.start()
        self._writer.start()
        _open_sinks.add(self)

    # ------------------------------------------------------------ the engine

    def started(self) -> None:
        """The agent has its copy of the write end: close ours, so that the pipe
        ends when the last process of the Run that holds it is gone."""
        self._close_write_end()

    def close(self) -> None:
        """The Run is over: finish writing what is left, without waiting here.
        A process outside the Run that still holds the pipe is cut off after
        DRAIN_AFTER_CLOSE seconds."""
        self._close_write_end()
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def settle(self, timeout: float = 2.0) -> bool:
        """Wait (on a Run's own thread, never the engine's) until what the agent
        wrote so far is in the file: its exit is read from the log's last lines.
        True when settled, False when `timeout` passed first (a full disk)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                pending = bool(self._buf) or self._writing
                eof = self._eof
            if not pending:
                try:
                    unread = not eof and _readable(self._r, 0)
                except (OSError, ValueError):
                    unread = False
                if not unread:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def wait(self, timeout: float = 5.0) -> bool:
        """For tests and shutdown: True once everything read is written."""
        self._reader.join(timeout)
        return self.written(timeout)

    def written(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the writer to put down all it holds (once
        the Run is over: `close`); True when it has."""
        self._writer.join(timeout)
        return not self._writer.is_alive()

    def _close_write_end(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    # ----------------------------------------------------------- the reader

    def _read_loop(self) -> None:
        deadline = None
        try:
            while True:
                if self._closing and deadline is None:
                    deadline = time.monotonic() + DRAIN_AFTER_CLOSE
                wait = 0.5 if deadline is None else max(0.0, deadline - time.monotonic())
                if not _readable(self._r, wait):
                    if deadline is not None and time.monotonic() >= deadline:
                        return
                    continue
                chunk = os.read(self._r, READ_SIZE)
                if not chunk:
                    return
                if self.tap is not None:
                    self._show(chunk)
                self._take(chunk)
        except OSError as e:
            log.warning("%s: reading the agent's output failed: %s", self.path, e)
        finally:
            os.close(self._r)
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    def _show(self, chunk: bytes) -> None:
        try:
            self.tap(chunk)  # type: ignore[misc]
        except Exception:  # a meter's bug never loses output
            log.exception("%s: the live meter failed; it is left off", self.path)
            self.tap = None

    def _take(self, chunk: bytes) -> None:
        with self._cond:
            self.received += len(chunk)
            self._wait_for_room(len(chunk))
            self._buf.append(chunk)
            self._buffered += len(chunk)
            while self._buffered > MEMORY_CAP and len(self._buf) > 1:
                gone = self._buf.pop(0)
                self._buffered -= len(gone)
                self.dropped += len(gone)
            self._cond.notify_all()

    def _wait_for_room(self, more: int) -> None:
        """Hold the reader (the lock held) while `more` bytes would take memory
        past MEMORY_CAP and the writer is getting on with a disk that takes them."""
        give_up = time.monotonic() + SLOW_DISK
        while self._buf and self._buffered + more > MEMORY_CAP and not self._refused:
            seen = self._progress
            left = give_up - time.monotonic()
            if left <= 0:
                return
            self._cond.notify_all()
            self._cond.wait(left)
            if self._progress != seen:
                give_up = time.monotonic() + SLOW_DISK

    # ----------------------------------------------------------- the writer

    def _write_loop(self) -> None:
        gave_up_at = None
        try:
            while True:
                with self._cond:
                    while not self._buf and not self._eof:
                        self._cond.wait(1.0)
                    if not self._buf:
                        return
                    data = b"".join(self._buf)
                    self._buf, self._buffered = [], 0
                    self._writing = True
                left = data
                try:
                    left = self._write(data)
                finally:
                    with self._cond:
                        self._writing = False
                        self._refused = bool(left)
                        self._progress += len(data) - len(left)
                        self._cond.notify_all()
                if not left:
                    continue
                with self._cond:  # the disk is full: keep the newest output
                    self._keep(left)
                    if self._eof:
                        gave_up_at = gave_up_at or time.monotonic() + KEEP_TRYING
                        if time.monotonic() >= gave_up_at:
                            self.dropped += self._buffered
                            log.warning(
                                "%s: %d bytes of output lost: the disk stayed full",
                                self.path,
                                self._buffered,
                            )
                            return
                    self._cond.wait(0.5)
        finally:
            try:
                os.close(self._file)
            except OSError:
                pass

    def _keep(self, left: bytes) -> None:
        """Put back what the disk refused, ahead of newer output, within MEMORY_CAP."""
        self._buf.insert(0, left)
        self._buffered += len(left)
        while self._buffered > MEMORY_CAP:
            over = self._buffered - MEMORY_CAP
            head = self._buf[0]
            if len(head) <= over:
                self._buf.pop(0)
                cut = len(head)
            else:
                self._buf[0] = head[over:]
                cut = over
            self._buffered -= cut
            self.dropped += cut

    def _write(self, data: bytes) -> bytes:
        """Write `data` within the cap, rotating at a line's end where there is
        one; return what the disk would not take."""
        if self.dropped > self._said_dropped:
            note = (
                f"\n[owl: {self.dropped - self._said_dropped} bytes of output lost here: "
                f"the disk was full]\n"
            ).encode()
            if self._put(note):
                self._said_dropped = self.dropped
        view = memoryview(data)
        while view:
            room = self.cap - self._size
            if room <= 0:
                if not self._rotate():
                    return bytes(view)
                continue
            split = len(view) > room
            part = view
            if split:
                nl = bytes(view[:room]).rfind(b"\n")
                part = view[: nl + 1] if nl >= 0 else view[:room]
            n = self._put_some(part)
            view = view[n:]
            if n < len(part):
                return bytes(view)
            if split and not self._rotate():
                return bytes(view)
        return b""

    def _put(self, data: bytes) -> bool:
        return self._put_some(memoryview(data)) == len(data)

    def _put_some(self, part: memoryview) -> int:
        """Write as much of `part` as the disk takes; on ENOSPC make room once."""
        done = 0
        freed = False
        while done < len(part):
            try:
                n = os.write(self._file, part[done:])
            except OSError as e:
                if e.errno not in (errno.ENOSPC, errno.EDQUOT) or freed:
                    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                        log.warning("%s: cannot write: %s", self.path, e)
                    break
                freed = True
                if not self._free_old():
                    break
                continue
            done += n
            self._size += n
        return done

    def _free_old(self) -> bool:
        """Remove `<log>.1` to make room; False if there was none."""
        try:
            self.old.unlink()
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            log.warning("%s: cannot remove to make room: %s", self.old, e)
            return False

    def _rotate(self) -> bool:
        """The log becomes `<log>.1` and a new one begins; no space needed.

        The log's name never goes missing, so a reader never finds no log:
        `<log>.1` is made a second name of the full log (a hard link), then a
        new empty file takes the log's name in one rename. Where hard links
        are not to be had, the log is renamed and a new one opened after it."""
        fresh_path = self.path.with_name(self.path.name + ".new")
        try:
            try:
                side = self.path.with_name(self.path.name + ".1.new")
                side.unlink(missing_ok=True)
                os.link(self.path, side)
                os.replace(side, self.old)
                fresh = os.open(
                    fresh_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600
                )
                os.replace(fresh_path, self.path)
            except FileNotFoundError:
                fresh = self._open_new()  # the log went missing: start it again
            except OSError as e:
                if e.errno not in (
                    errno.EPERM,
                    errno.EXDEV,
                    errno.EMLINK,
                    errno.ENOTSUP,
                    errno.EOPNOTSUPP,
                ):
                    raise
                os.replace(self.path, self.old)
                fresh = self._open_new()
        except OSError as e:
            if not self._rotate_failed:
                log.warning("%s: cannot rotate: %s", self.path, e)
            self._rotate_failed = True
            return False
        self._rotate_failed = False
        os.close(self._file)
        self._file, self._size = fresh, 0
        return True

    def _open_new(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


_open_sinks: "weakref.WeakSet[Sink]" = weakref.WeakSet()


@atexit.register
def _drain_all() -> None:
    """At exit (the daemon stopping after its Runs ended), let each writer put
    down what it still holds, within DRAIN_AFTER_CLOSE in all."""
    deadline = time.monotonic() + DRAIN_AFTER_CLOSE
    for sink in list(_open_sinks):
        sink.close()
        sink.written(max(0.0, deadline - time.monotonic()))


def _readable(fd: int, timeout: float) -> bool:
    """Whether `fd` has something to read (or its end) within `timeout` s. poll,
    not select: a daemon with many connections has fds past select's 1024."""
    import select

    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(int(timeout * 1000)))


def _widen(fd: int) -> None:
    """A bigger pipe (Linux), so a burst of output never waits on the reader."""
    import fcntl

    op = getattr(fcntl, "F_SETPIPE_SZ", None)
    if op is None:
        return
    try:
        fcntl.fcntl(fd, op, PIPE_SIZE)
    except OSError:
        pass
