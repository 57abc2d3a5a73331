"""A session's CPU weight (Linux's autogroup), written within the kernel's limit.

The kernel lets a process without CAP_SYS_ADMIN change any session's autogroup
niceness at most once per 100 ms, machine-wide (`/proc/PID/autogroup` answers
EAGAIN until then). An ordinary user's daemon meeting three new sessions in one
sweep would leave two of them at 0, weighing as much as the person's whole
desktop session. So a write refused for that reason is handed to one thread
here, which writes it again once the limit allows (never the engine's thread:
it must not wait), for as long as the process is the one seen.
"""

from __future__ import annotations

import errno
import os
import queue
import threading
import time
from typing import Callable

# The kernel's limit is HZ/10 jiffies since the last write by anyone: a little more
# than 100 ms between tries, and enough tries to outlast other writers for a while.
RETRY_EVERY = 0.105
MAX_TRIES = 100

Write = Callable[[int, int, int], bool]  # (pid, start, nice) -> written; OSError(EAGAIN) = later


class Later:
    """One thread writing the session weights the kernel refused for now."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._q: queue.SimpleQueue[tuple[int, int, int]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, pid: int, start: int, nice: int) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._main, daemon=True, name="owl-autogroup"
                )
                self._thread.start()
        self._q.put((pid, start, nice))

    def _main(self) -> None:
        while True:
            self._write_soon(*self._q.get())

    def _write_soon(self, pid: int, start: int, nice: int) -> None:
        for _ in range(MAX_TRIES):
            time.sleep(RETRY_EVERY)
            try:
                self._write(pid, start, nice)
                return
            except OSError as e:
                if e.errno != errno.EAGAIN:
                    return


def write_once(folder: int, nice: int) -> None:
    """Write `nice` to the autogroup file of the /proc directory `folder` (an fd);
    OSError as the kernel answers (EAGAIN: not within 100 ms of the last write)."""
    fd = os.open("autogroup", os.O_WRONLY, dir_fd=folder)
    try:
        os.write(fd, str(nice).encode())
    finally:
        os.close(fd)
